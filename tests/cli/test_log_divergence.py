"""State and log never diverge silently.

A file Shard Log cut below the shard's applied position (or holding other bytes there)
stops that shard: the engine starts with it FAILED and the error naming the shard, the
applied position, the log's end and the way back; nothing is appended to it, with the
engine down or up; ``doctor`` fails naming it. Moving the state aside rebuilds it from the
log, as the error says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.daemon import running_engine, start_engine, stop_engine

SHARD = "default/0"


def on_shard(partition: int, prefix: str, partitions: int = 2) -> str:
    """A delayMessageId whose shard is ``default/<partition>``."""
    from nereus.shard import partition_for

    return next(f"{prefix}-{n}" for n in range(1000)
                if partition_for(f"{prefix}-{n}", partitions) == partition)


def shard_row(home: Path, shard: str = SHARD) -> dict[str, Any]:
    listed = run_nereus("--json", "shard", "list", home=home)
    assert listed.code == 0, listed.stderr
    (row,) = [s for s in listed.json() if s["shard"] == shard]
    assert isinstance(row, dict), row
    return row


def cut_last_record(log_dir: Path) -> None:
    """What a careless operator does: truncate the last record off the last segment."""
    from nereus.framing import Frame, read_frame

    segment = sorted(log_dir.glob("*.seg"))[-1]
    data = segment.read_bytes()
    pos = last = 0
    while pos < len(data):
        frame = read_frame(data, pos)
        assert isinstance(frame, Frame)
        last, pos = pos, frame.end
    with open(segment, "r+b") as handle:
        handle.truncate(last)


def schedule(home: Path, delay_message_id: str) -> Any:
    return run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                      "--payload", "x", "--id", delay_message_id, home=home)


def assert_names_the_divergence(text: str, applied: int) -> None:
    assert f"shard {SHARD} has diverged from its Shard Log" in text
    assert f"ends at position {applied}" in text
    assert f"applied up to position {applied}" in text


def assert_recovery_hint(text: str) -> None:
    assert "Recovery Set" in text and f"nereus recovery-set show {SHARD}" in text
    assert "nereus checkpoint restore" in text


def test_a_log_cut_below_the_applied_position_fails_the_shard(home: Path) -> None:
    """Cut the last applied record off default/0's log (engine stopped): schedules to that
    shard are refused with the engine down and up and nothing is appended; the engine
    starts with the shard FAILED; doctor fails naming it; default/1 works throughout."""
    with running_engine(home):
        assert schedule(home, on_shard(0, "before")).code == 0
    before = shard_row(home)
    applied = before["applied_position"]
    assert before["log_end_position"] == applied + 1
    cut_last_record(home / "shardlog" / "default" / "0")

    down = schedule(home, on_shard(0, "down"))
    assert down.code == 1, down.stdout
    assert_names_the_divergence(one_json(down)["error"], applied)
    assert_recovery_hint(one_json(down)["hint"])
    assert shard_row(home)["log_end_position"] == applied
    assert schedule(home, on_shard(1, "other")).code == 0

    started = run_nereus("--json", "engine", "start", "--timeout", "30", home=home, timeout=60)
    try:
        assert started.code == 0, started.stderr
        assert f"shard {SHARD} is FAILED" in started.stderr
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.json()["running"] is True, status.stderr
        assert status.json().get("healthy") in (False, None)  # where status judges health
        shards = {s["shard"]: s for s in status.json()["shards"]}
        assert shards[SHARD]["state"] == "FAILED"
        assert_names_the_divergence(shards[SHARD]["error"], applied)
        assert_recovery_hint(shards[SHARD]["error"])
        assert shards["default/1"]["state"] == "ACTIVE"

        up = schedule(home, on_shard(0, "up"))
        assert up.code == 1, up.stdout
        assert_names_the_divergence(one_json(up)["error"], applied)

        doctor = run_nereus("--json", "doctor", home=home)
        assert doctor.code == 1, doctor.stdout
        checks = {c["name"]: c for c in one_json(doctor)["checks"]}
        assert checks[f"shard_log {SHARD}"]["ok"] is False
        assert_names_the_divergence(checks[f"shard_log {SHARD}"]["detail"], applied)
        assert_recovery_hint(checks[f"shard_log {SHARD}"]["fix"])
        assert checks["shard_log default/1"]["ok"] is True
    finally:
        stop_engine(home)
    assert shard_row(home)["log_end_position"] == applied  # no barrier, no admission

    # the way back the hint gives: the state moved aside is rebuilt from the log
    state = home / "state" / "default" / "0"
    state.rename(state.with_name("0.diverged"))
    with running_engine(home):
        status = run_nereus("--json", "engine", "status", home=home).json()
        assert all(s["state"] == "ACTIVE" for s in status["shards"])
        assert schedule(home, on_shard(0, "after")).code == 0
    doctor = run_nereus("--json", "doctor", home=home)
    checks = {c["name"]: c for c in one_json(doctor)["checks"]}
    assert checks[f"shard_log {SHARD}"]["ok"] is True


def test_a_log_that_holds_other_bytes_at_the_applied_position_fails_the_shard(
        home: Path) -> None:
    """A record appended at the lost position (what a client did before this check) is
    not the record the state applied: its SHA-256 differs from the stored result's, so
    the engine starts with the shard FAILED and doctor fails."""
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.records import QueryBarrier, encode

    start_engine(home)
    stop_engine(home)
    applied = shard_row(home)["applied_position"]
    log_dir = home / "shardlog" / "default" / "0"
    cut_last_record(log_dir)
    log = FileShardLog(log_dir, create=False)
    (receipt,) = log.append([encode(QueryBarrier(command_id="taken-the-lost-position"))])
    log.close()
    assert receipt.position == applied

    started = run_nereus("--json", "engine", "start", "--timeout", "30", home=home, timeout=60)
    try:
        assert started.code == 0, started.stderr
        shards = {s["shard"]: s for s in
                  run_nereus("--json", "engine", "status", home=home).json()["shards"]}
        assert shards[SHARD]["state"] == "FAILED"
        error = shards[SHARD]["error"]
        assert f"record at the applied position {applied} is not the one the state" in error
        assert_recovery_hint(error)
    finally:
        stop_engine(home)
    doctor = run_nereus("--json", "doctor", home=home)
    assert doctor.code == 1
    checks = {c["name"]: c for c in one_json(doctor)["checks"]}
    assert "is not the one the state applied" in checks[f"shard_log {SHARD}"]["detail"]
    assert shard_row(home)["log_end_position"] == applied + 1
