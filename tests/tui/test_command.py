"""``nereus dashboard`` as a command: it costs nothing until run, and refuses clearly
where it cannot work (no terminal, --json, no home)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import run_nereus

PROBE = """
import sys
from nereus.cli.main import main
try:
    main([{args}])
except SystemExit:
    pass
heavy = sorted(m for m in ("textual", "nereus.tui", "nereus.tui.app") if m in sys.modules)
print("LOADED", heavy, file=sys.stderr)
"""


def _loaded_after(*args: str) -> str:
    code = PROBE.format(args=", ".join(repr(a) for a in args))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED")]
    assert line, proc.stderr
    return line[-1]


def test_help_does_not_import_textual() -> None:
    """`nereus --help` and `nereus dashboard --help` leave textual out of sys.modules."""
    assert _loaded_after("--help") == "LOADED []"
    assert _loaded_after("dashboard", "--help") == "LOADED []"


def test_dashboard_needs_a_terminal(home: Path) -> None:
    """Without a tty it exits 2 and says why (stdin/stdout are pipes here)."""
    result = run_nereus("dashboard", home=home)
    assert result.code == 2
    assert "needs a terminal" in result.stderr


def test_dashboard_refuses_json_and_a_missing_home(tmp_path: Path) -> None:
    """--json is a usage error (exit 2); a home without nereus.toml is not found (exit 3)."""
    missing = run_nereus("dashboard", home=tmp_path / "nowhere")
    assert missing.code == 3 and "nereus.toml" in missing.stderr
    as_json = run_nereus("--json", "dashboard", home=tmp_path / "nowhere")
    assert as_json.code == 2 and as_json.json()["error"].startswith("the dashboard is")
