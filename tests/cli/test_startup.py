"""``nereus --help`` stays light: no UI toolkit, cloud SDK, broker or etcd client, RocksDB or
Prometheus client."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("textual", "boto3", "botocore", "confluent_kafka", "pulsar", "etcd3gw", "rocksdict",
         "structlog", "prometheus_client")

# Runs the CLI's entry point as the console script does, then reports what got imported.
PROBE = """
import contextlib, io, json, sys
sys.argv = ["nereus", *{args!r}]
from nereus.cli.entry import main
code = None
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps({{"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}}))
"""


def _imports(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=list(args))],
                          capture_output=True, text=True, check=True, timeout=60, env=env)
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("args", [("--help",), ("lane", "--help"), ("metrics", "--help"),
                                  ("completion", "bash")],
                         ids=" ".join)
def test_light_commands_import_no_heavy_module(args: tuple[str, ...]) -> None:
    """Help and completion scripts print without importing any heavy package."""
    result = _imports(*args)
    assert result["code"] in (0, None), result
    assert result["out"], "the command printed nothing"
    modules = result["modules"]
    assert isinstance(modules, list)
    loaded = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert not loaded, f"`nereus {' '.join(args)}` imported {', '.join(loaded)}"


def test_root_help_comes_from_its_rendered_text_and_matches_the_live_one() -> None:
    """`nereus --help` prints cli/help/nereus.txt without importing Typer or any command
    module; the live rendering (NEREUS_HELP_CACHE=off) prints the same text at 80 columns
    and wider, and stays light too."""
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    base.pop("COLUMNS", None)
    cached = _imports("--help", env=base)
    modules = cached["modules"]
    assert isinstance(modules, list)
    assert "typer" not in {m.split(".")[0] for m in modules}
    assert not any(m.startswith("nereus.cli.commands") for m in modules)
    for columns in ("80", "200"):
        live = _imports("--help", env={**base, "NEREUS_HELP_CACHE": "off", "COLUMNS": columns})
        assert live["out"] == cached["out"], columns
        live_modules = live["modules"]
        assert isinstance(live_modules, list) and "typer" in {m.split(".")[0]
                                                              for m in live_modules}
