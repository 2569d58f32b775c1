"""``message show`` without a running engine reads the shard's state offline (read-only)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.engine_homes import init_home
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until


def test_message_show_reads_the_state_offline(tmp_path: Path) -> None:
    """Queued but never applied: exit 3 saying nothing was applied. Applied by an engine
    that then stopped: the message, its state and the log position, exit 0; --barrier
    still needs the engine (exit 4)."""
    home = init_home(tmp_path / "home")
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--id", "off-1", "--payload", "x", home=home)
    assert queued.code == 0, queued.stderr
    before = run_nereus("message", "show", "off-1", home=home)
    assert before.code == 3 and "nothing applied yet" in before.stderr, before.stderr
    with running_engine(home):
        wait_until("off-1 applied",
                   lambda: run_nereus("--json", "message", "show", "off-1", home=home)
                 .json().get("state") == "SCHEDULED" or None, 30)
    shown = run_nereus("--json", "message", "show", "off-1", home=home)
    assert shown.code == 0, shown.stderr
    data = shown.json()
    assert data["state"] == "SCHEDULED" and data["conclusive"] is True
    assert data["applied_position"] is not None
    assert run_nereus("message", "show", "off-1", "--barrier", home=home).code == 4
    # an id the shard never held: exit 3, the error document saying where the state is in
    # the log and why a message one expects can be missing (rejected, or swept)
    missing = run_nereus("--json", "message", "show", "never-scheduled", home=home)
    assert missing.code == 3
    error = missing.json()
    assert error["ok"] is False and "no message never-scheduled on shard" in error["error"]
    assert "applied up to position" in error["error"]
    assert "REJECTED" in error["hint"] and "retention" in error["hint"]
