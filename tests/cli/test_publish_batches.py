"""An engine writes one turn's admissions and outcomes as PUBLISH_BATCH records only once
the home's feature level allows it (``nereus upgrade finalize`` to 2), and as records of
their own below it; ``shard log`` shows a batch's members one by one, and a replay from
empty gives the live digest either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.daemon import kill_engine, process_gone, read_outbox, running_engine, start_engine
from tests.polling import wait_until

MESSAGES = [f"batch-{n}" for n in range(8)]


def _queue(home: Path, ids: list[str]) -> None:
    """Schedule ``ids`` on lane local, due in 1 s, with one ``message schedule --batch``
    (no engine yet: queued straight to the log, due together)."""
    path = home.parent / "batch.jsonl"
    path.write_text("".join(json.dumps({"id": i, "lane": "local", "delay": "1s"}) + "\n"
                            for i in ids))
    queued = run_nereus("--json", "message", "schedule", "--batch", str(path), home=home)
    assert queued.code == 0, queued.stdout + queued.stderr


def _log(home: Path) -> list[dict[str, Any]]:
    """Shard default/0's log as ``shard log --json`` prints it."""
    log = run_nereus("--json", "shard", "log", "default/0", home=home)
    assert log.code == 0, log.stderr
    return [json.loads(line) for line in log.stdout.splitlines()]


@pytest.mark.parametrize("level", [1, 2])
def test_batches_are_written_only_at_level_2_and_shown_member_by_member(
        tmp_path: Path, level: int) -> None:
    """Eight messages queued due together are published by one engine run. At level 2 their
    admissions and outcomes are members of PUBLISH_BATCH records (``shard log`` shows each
    with its position and index, never the envelope); at level 1 every one is a record of
    its own. Either way each message has one admission and one outcome, and ``shard replay
    --empty --compare live`` matches."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    raised = run_nereus("--json", "upgrade", "finalize", "--to", str(level), "--reason", "t",
                        "--yes", home=home)
    assert raised.code == 0, raised.stdout + raised.stderr
    _queue(home, MESSAGES)
    with running_engine(home):
        wait_until("every message published",
                   lambda: len(read_outbox(home / "outbox" / "local.jsonl")) >= len(MESSAGES),
                   60, interval_s=0.2)
        wait_until("every outcome applied", lambda: sum(
            e["kind"] == "PUBLISH_OUTCOME" for e in _log(home)) >= len(MESSAGES), 60,
            interval_s=0.2)
    entries = _log(home)
    members = [e for e in entries if "member" in e]
    assert not any(e["kind"] == "PUBLISH_BATCH" for e in entries)
    for kind in ("PUBLISH_ADMISSION", "PUBLISH_OUTCOME"):
        ids = sorted(e["ids"]["delay_message_id"] for e in entries if e["kind"] == kind)
        assert ids == sorted(MESSAGES), (kind, ids)
    if level == 1:
        assert members == []
    else:
        assert members and {e["kind"] for e in members} <= {"PUBLISH_ADMISSION",
                                                             "PUBLISH_OUTCOME"}
        batches = {e["position"] for e in members}
        assert len(members) > len(batches)  # several records per envelope
    replay = run_nereus("--json", "shard", "replay", "default/0", "--empty", "--compare", "live",
                        home=home, timeout=120)
    assert replay.code == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["match"] is True


def test_kill_9_at_level_2_loses_nothing_and_replays_to_the_live_digest(tmp_path: Path) -> None:
    """At level 2, the engine is SIGKILLed as soon as the first of a 300-message burst is
    out (batches appended, applied or not yet); restarted, it publishes every message, no
    attempt is sent twice, and a replay from empty of the log, batches and all, gives the
    live digest."""
    home = tmp_path / "home"
    assert run_nereus("init", home=home).code == 0
    assert run_nereus("--json", "upgrade", "finalize", "--reason", "t", "--yes",
                      home=home).code == 0
    ids = [f"k9-{n}" for n in range(300)]
    _queue(home, ids)
    outbox = home / "outbox" / "local.jsonl"
    start_engine(home)
    wait_until("some published", lambda: len(read_outbox(outbox)) > 0, 60, interval_s=0.05)
    pid = kill_engine(home)
    assert pid is not None
    wait_until(f"engine pid {pid} gone", lambda: process_gone(pid), 20)
    with running_engine(home):
        wait_until("every message published", lambda: {
            line["delay_message_id"] for line in read_outbox(outbox)} >= set(ids), 90,
            interval_s=0.2)
    lines = read_outbox(outbox)
    assert len({(line["delay_message_id"], line["attempt_id"]) for line in lines}) == len(lines)
    replay = run_nereus("--json", "shard", "replay", "default/0", "--empty", "--compare", "live",
                        home=home, timeout=120)
    assert replay.code == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["match"] is True
