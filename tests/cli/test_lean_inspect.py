"""``nereus shard inspect`` on the console script's lean path (``nereus.cli.lean``): the
same bytes and exit status as the full Typer app for every form it reads, the full app for
every form it does not, and neither Typer nor (under ``--json``) Rich loaded."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from nereus.cli.lean import InspectLine, lean_line
from nereus.cli.output import shown
from nereus.cli.shard_offline import _draw, _view
from nereus.inspection import ShardReport
from tests.conftest import NEREUS, run_nereus
from tests.terminal import on_terminal

SHARD = "default/0"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh one-shard home whose database applied three messages, with a fourth queued
    in the log after it (lag 1), so every figure of the report has a value."""
    path = tmp_path_factory.mktemp("lean") / "home"
    assert run_nereus("init", "--partitions", "1", home=path).code == 0
    for n in range(3):
        result = run_nereus("message", "schedule", "--lane", "local", "--deliver-at",
                            f"2030-01-01T00:00:0{n}Z", "--payload", f"m{n}", home=path)
        assert result.code == 0, result.stderr
    result = run_nereus("shard", "replay", SHARD, "--empty", "--into",
                        str(path / "state" / SHARD), home=path)
    assert result.code == 0, result.stderr
    result = run_nereus("message", "schedule", "--lane", "local", "--deliver-at",
                        "2030-01-02T00:00:00Z", "--payload", "queued", home=path)
    assert result.code == 0, result.stderr
    return path


def _run(args: list[str], *, lean: bool, env: dict[str, str]) -> tuple[int, str, str]:
    """The installed ``nereus`` with ``args`` (no NEREUS_* or COLUMNS from this process),
    on the lean path or (``NEREUS_LEAN=off``) through the full app."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("NEREUS_") and k != "COLUMNS"}
    environ.update(env)
    if not lean:
        environ["NEREUS_LEAN"] = "off"
    done = subprocess.run([NEREUS, *args], capture_output=True, text=True, env=environ,
                          timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


# each line as an operator types it: {home} and {db} are filled in; env on top
LINES: dict[str, tuple[list[str], dict[str, str]]] = {
    "json": (["--home", "{home}", "shard", "inspect", SHARD, "--json"], {}),
    "table": (["shard", "inspect", SHARD, "--home={home}"], {}),
    "table-narrow": (["shard", "inspect", SHARD, "--home", "{home}"], {"COLUMNS": "60"}),
    "yaml": (["-o", "yaml", "shard", "inspect", SHARD, "--home", "{home}"], {}),
    "output-json-db": (["shard", "--output=json", "inspect", SHARD, "--db", "{db}"], {}),
    "db-table": (["shard", "inspect", "--db={db}", SHARD], {}),
    "home-from-env": (["shard", "inspect", SHARD, "--json"], {"NEREUS_HOME": "{home}"}),
    "format-from-env": (["shard", "inspect", SHARD, "--home", "{home}"],
                        {"NEREUS_OUTPUT": "json"}),
    "no-such-shard": (["shard", "inspect", "default/7", "--json", "--home", "{home}"], {}),
    "no-such-shard-table": (["shard", "inspect", "nowhere/0", "--home", "{home}"], {}),
    "no-such-db": (["--json", "shard", "inspect", SHARD, "--db", "{home}/missing"], {}),
    "bad-output": (["shard", "inspect", SHARD, "-o", "xml", "--home", "{home}"], {}),
    "bad-shard-name": (["shard", "inspect", "default", "--json", "--home", "{home}"], {}),
    "no-home": (["shard", "inspect", SHARD, "--json", "--home", "{home}/nothing"], {}),
}


@pytest.mark.parametrize("name", LINES)
def test_the_lean_path_prints_what_the_full_app_prints(home: Path, name: str) -> None:
    """For each form of the line — JSON, YAML and tables (also narrow), --home and --db
    in every spelling and place, the home and the format from the environment, and the
    errors (no such shard or database, a bad name or format, no home) — the lean path
    and the Typer app give the same stdout, stderr and exit status, byte for byte."""
    template, extra = LINES[name]
    db = str(home / "state" / SHARD)
    args = [a.format(home=home, db=db) for a in template]
    env = {k: v.format(home=home) for k, v in extra.items()}
    lean = _run(args, lean=True, env=env)
    full = _run(args, lean=False, env=env)
    assert lean == full
    if name in ("json", "home-from-env", "output-json-db"):
        report = json.loads(lean[1])
        assert lean[0] == 0 and report["shard"] == SHARD
        assert report["messages_by_state"]["SCHEDULED"] == 3
        if name != "output-json-db":
            assert report["lag"] == 1  # the queued fourth message
    if name.startswith("no-") or name.startswith("bad-"):
        assert lean[0] != 0


def _imports(args: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """The exit status of the installed console script run under ``-X importtime`` with
    ``args``, and every module it imported (Python's own list, on stderr)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")
               and k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    environ.update(env or {})
    done = subprocess.run([sys.executable, "-X", "importtime", NEREUS, *args],
                          capture_output=True, text=True, env=environ, timeout=60,
                          check=False)
    modules = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    return done.returncode, modules


@pytest.mark.parametrize(("output", "env"), [
    (["--json"], {}), (["-o", "yaml"], {}), ([], {}), ([], {"COLUMNS": "160"}),
    ([], {"COLUMNS": "40"}),
], ids=["json", "yaml", "table-piped", "table-fits", "table-narrower"])
def test_the_lean_path_loads_neither_typer_nor_the_command_tree(
        home: Path, output: list[str], env: dict[str, str]) -> None:
    """The installed script answers ``shard inspect`` from nereus.cli.lean: neither Typer,
    nereus.cli.main nor any command module is imported; Rich neither, but for a table to
    fit in a narrower width (COLUMNS) than it is drawn in. Nor ``logging``:
    the lean path leaves the root logger without the full app's NullHandler
    (``prepare_process(library_logs=False)``), right only while nothing it loads logs."""
    code, modules = _imports(["shard", "inspect", SHARD, "--home", str(home), *output], env)
    assert code == 0
    assert "nereus.cli.lean" in modules and "nereus.cli.shard_offline" in modules
    tops = {m.split(".")[0] for m in modules}
    assert "typer" not in tops
    assert "logging" not in tops
    assert "nereus.cli.main" not in modules
    assert not any(m.startswith("nereus.cli.commands") for m in modules)
    assert ("rich" in tops) == (env.get("COLUMNS") == "40")


def test_on_a_terminal_the_report_is_richs_drawn_without_rich(home: Path) -> None:
    """On a 160-column terminal the lean path draws the report itself, without importing
    Rich, and draws exactly what Rich draws from the same document on such a terminal:
    the shard line and the tables' headers bold, their titles italic."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")
               and k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    environ["TERM"] = "xterm-256color"
    code, out, err = on_terminal([sys.executable, "-X", "importtime", NEREUS, "shard",
                                  "inspect", SHARD, "--home", str(home)], environ,
                                 columns=160)
    assert code == 0, err
    modules = {line.rsplit("|", 1)[1].strip() for line in err.splitlines()
               if line.startswith("import time:") and "|" in line}
    assert "nereus.cli.lean" in modules
    assert "rich" not in {m.split(".")[0] for m in modules}
    document = json.loads(_run(["shard", "inspect", SHARD, "--json", "--home", str(home)],
                               lean=True, env={})[1])
    drawn = io.StringIO()
    console = Console(file=drawn, highlight=False, soft_wrap=True, width=160,
                      force_terminal=True, _environ={"TERM": "xterm-256color"})
    _draw(console, _view(shown(msgspec.convert(document, ShardReport))))
    assert out == drawn.getvalue()
    assert out.startswith(f"\x1b[1mshard {SHARD}\x1b[0m  schema v")
    assert "\x1b[3mmessages by state\x1b[0m\n┏" in out


def test_inspect_of_a_database_loads_neither_inspect_nor_dataclasses(
        home: Path, tmp_path: Path) -> None:
    """``shard inspect --db`` in a home with no configuration (what ``bench/verify.py``
    times) imports msgspec without ``typing_extensions``, so none of ``inspect``, ``ast``
    and ``dataclasses`` is loaded: a tenth of the run."""
    empty = tmp_path / "empty"
    code, modules = _imports(["shard", "inspect", SHARD, "--home", str(empty),
                              "--db", str(home / "state" / "default" / "0")])
    assert code == 0
    assert "msgspec" in modules
    # (typing_extensions is listed too: -X importtime names the import msgspec tried)
    assert not {"inspect", "ast", "dataclasses"} & modules


def test_msgspec_imported_alone_leaves_typing_extensions_importable() -> None:
    """``import_msgspec_alone`` hides ``typing_extensions`` from msgspec's import only:
    afterwards the package imports as usual, and msgspec still decodes the Structs of the
    state with ``typing``'s own annotation forms."""
    program = (
        "import sys\n"
        "from nereus.cli.lean import import_msgspec_alone\n"
        "import_msgspec_alone()\n"
        "assert 'typing_extensions' not in sys.modules and 'msgspec' in sys.modules\n"
        "import typing_extensions\n"
        "from nereus.state.values import Identity, decode_value, encode_value\n"
        "identity = Identity(route='r', partition=2, schema_version=1)\n"
        "assert decode_value(encode_value(identity), Identity) == identity\n"
        "print(typing_extensions.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "typing_extensions"


def test_a_line_the_lean_path_does_not_read_goes_to_the_full_app(home: Path) -> None:
    """``shard inspect --help`` is not the lean path's: the script builds the Typer app."""
    code, modules = _imports(["shard", "inspect", "--help"])
    assert code == 0
    assert "typer" in {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(("args", "expected"), [
    (["shard", "inspect", "a/0"], InspectLine(shard="a/0", db=None, home=None,
                                              json_output=False, output=None)),
    (["--json", "--home", "h", "shard", "inspect", "a/0", "--db", "d"],
     InspectLine(shard="a/0", db="d", home="h", json_output=True, output=None)),
    (["shard", "-o", "yaml", "inspect", "--home=h1", "a/0", "--home", "h2", "--output=json"],
     InspectLine(shard="a/0", db=None, home="h2", json_output=False, output="json")),
    (["shard", "inspect", "--db=d1", "a/0", "--db", "d2"],
     InspectLine(shard="a/0", db="d2", home=None, json_output=False, output=None)),
])
def test_lean_line_reads_plain_shard_inspect_lines(args: list[str],
                                                   expected: InspectLine) -> None:
    """The root options anywhere, --db after ``inspect``, both spellings of a value, the
    last of a repeated option (as Click takes it)."""
    assert lean_line(args) == expected


@pytest.mark.parametrize("args", [
    ["shard", "inspect", "a/0", "--help"], ["shard", "inspect", "-h"],
    ["shard", "inspect"], ["shard", "inspect", "a/0", "b/0"], ["shard", "list"],
    ["inspect", "shard", "a/0"], ["shard", "--db", "d", "inspect", "a/0"],
    ["--db", "d", "shard", "inspect", "a/0"], ["shard", "inspect", "a/0", "--db"],
    ["shard", "inspect", "a/0", "--db", ""], ["shard", "inspect", "a/0", "--home="],
    ["shard", "inspect", "a/0", "--db", "--json"], ["shard", "inspect", "-ojson", "a/0"],
    ["shard", "inspect", "a/0", "-o=json"], ["shard", "inspect", "a/0", "--json=1"],
    ["shard", "inspect", "--", "a/0"], ["shard", "inspect", "-", "a/0"],
    ["shard", "inspect", "a/0", "--verbose"], ["--json"],
], ids=" ".join)
def test_lean_line_leaves_every_other_form_to_the_full_app(args: list[str]) -> None:
    """Help, a missing or extra word, --db before ``inspect`` or without a value, empty or
    dash-led values, short options glued to a value, ``--``, unknown options: None."""
    assert lean_line(args) is None
