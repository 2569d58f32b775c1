"""``nereus message explain``: the first gate that holds a message, as an operator asks
it of a running engine (installed ``nereus``, fresh home, ``--json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until


def _explain(home: Path, message_id: str) -> dict[str, Any]:
    result = run_nereus("--json", "message", "explain", message_id, home=home)
    assert result.code == 0, result.stderr
    document: dict[str, Any] = result.json()
    assert [g["gate"] for g in document["gates"]] == [
        "shard", "message", "lane_gate", "readiness", "trusted_time", "expiry",
        "ordered_head", "quota", "capacity", "permits", "capability"]
    return document


def _waiting(home: Path) -> dict[str, int]:
    listed = run_nereus("--json", "lane", "list", home=home)
    assert listed.code == 0, listed.stderr
    (lane,) = [lane for lane in listed.json() if lane["lane"] == "local"]
    waiting: dict[str, int] = lane["waiting_by_reason"]
    return waiting


def _schedule(home: Path, message_id: str, *extra: str, lane: str = "local") -> None:
    done = run_nereus("--json", "message", "schedule", "--lane", lane, "--id", message_id,
                      "--payload", "x", "--wait", *extra, home=home)
    assert done.code == 0, done.stderr


def _home(tmp_path: Path, extra: str = "") -> Path:
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "1", home=home).code == 0
    if extra:
        config = home / "nereus.toml"
        config.write_text(config.read_text() + extra)
    return home


def test_not_due_closed_lane_and_paused_shard_each_name_their_gate(tmp_path: Path) -> None:
    """An hour ahead: trusted_time. Due on a lane an operator closed: lane_gate, with who
    and why from the Shard Log, and lane list counts one message of each reason. Due on a
    paused shard: shard."""
    home = _home(tmp_path)
    with running_engine(home):
        _schedule(home, "later", "--delay", "1h")
        later = _explain(home, "later")
        assert later["held_by"] == "trusted_time" and "not due" in later["why"]
        closed = run_nereus("lane", "close", "local", "--reason", "INC-7 broker degraded",
                            "--as", "carol", "--yes", "--wait", home=home)
        assert closed.code == 0, closed.stderr
        _schedule(home, "gated", "--delay", "0s")
        gated = _explain(home, "gated")
        assert gated["held_by"] == "lane_gate"
        assert "CLOSED" in gated["why"] and "carol" in gated["why"] and "INC-7" in gated["why"]
        wait_until("lane list counts the waiting messages by reason",
                   lambda: _waiting(home) == {"not due": 1, "admissionGate CLOSED": 1} or None, 30)
        paused = run_nereus("shard", "pause", "default/0", "--reason", "disk swap", "--yes",
                            "--wait", home=home)
        assert paused.code == 0, paused.stderr
        assert _explain(home, "gated")["held_by"] == "shard"
        shown = run_nereus("message", "explain", "gated", home=home)
        assert shown.code == 0 and "held by shard" in shown.stdout


def test_a_lane_not_ready_names_readiness(tmp_path: Path) -> None:
    """A lane whose file destination cannot be opened (its directory is a file) is NOT
    READY: a due message on it is held by readiness, with the probe's reason."""
    home = _home(tmp_path, '\n[lanes.broken]\ndestination = "file"\n'
                           'path = "blocked/out.jsonl"\n')
    (home / "blocked").write_text("a file where a directory should be")
    with running_engine(home):
        _schedule(home, "stuck", "--delay", "0s", lane="broken")
        stuck = _explain(home, "stuck")
        assert stuck["held_by"] == "readiness", stuck
        assert "NOT READY" in stuck["why"] and "cannot open" in stuck["why"]
        _schedule(home, "fine", "--delay", "1h")
        assert _explain(home, "fine")["held_by"] == "trusted_time"
