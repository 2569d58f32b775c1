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
from nereus.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps({{"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}}))
"""


def _imports(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=list(args))],
                          capture_output=True, text=True, check=True, timeout=60)
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
