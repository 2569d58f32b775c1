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
from tests.daemon import read_outbox, running_engine
from tests.polling import wait_until

MESSAGES = [f"batch-{n}" for n in range(8)]


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
    for message_id in MESSAGES:  # no engine yet: queued straight to the log, due together
        queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1s",
                            "--id", message_id, home=home)
        assert queued.code == 0, queued.stdout + queued.stderr
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
