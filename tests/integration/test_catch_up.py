"""An activation whose local state is far behind the shard's Recovery Set restores the
newest checkpoint over it instead of replaying millions of records
(``engine/process/restore_catch_up.py``): here an old copy of the state, 12,000 records behind a
checkpoint, put back in the home."""

from __future__ import annotations

import shutil
from pathlib import Path

from nereus.layout import HomeLayout
from nereus.shard import ShardId
from tests.integration.engine_harness import Events, file_lane, in_process_engine, now_ms
from tests.polling import wait_until

SHARD = ShardId("default", 0)
LANES = file_lane("local", "outbox/local.jsonl") + "\n[checkpoints]\nevery_records = 1000\n"


def test_a_state_far_behind_the_recovery_set_is_restored_at_activation(
        tmp_path: Path) -> None:
    """Old copy at ~100 records, checkpoint at ~12,100: the next start restores the
    checkpoint (``state_restored``, reason "far behind the Recovery Set") and every
    message is there; a copy only a little behind is replayed, not restored."""
    home = tmp_path / "home"
    state = HomeLayout(home).shard_state(SHARD)
    due = now_ms() + 3_600_000
    with in_process_engine(home, partitions=1, lanes=LANES) as h:
        h.queue([h.schedule(f"early-{n}", due) for n in range(100)])
        (loop,) = h.engine.shards.values()
        wait_until("the early records", lambda: (loop.applied_position or 0) >= 100, 30)
    old_copy = tmp_path / "old-state"
    shutil.copytree(state, old_copy)
    with in_process_engine(home, partitions=1, lanes=LANES) as h:
        h.queue([h.schedule(f"late-{n}", due) for n in range(12_000)])
        (loop,) = h.engine.shards.values()
        wait_until("the late records", lambda: (loop.applied_position or 0) >= 12_100, 60)
        loop.request_checkpoint().result(timeout=60)
    shutil.rmtree(state)
    shutil.copytree(old_copy, state)
    events = Events()
    with in_process_engine(home, partitions=1, lanes=LANES, log_event=events) as h:
        (loop,) = h.engine.shards.values()
        restored = events.named("state_restored")
        assert [r["reason"] for r in restored] == ["far behind the Recovery Set"], restored
        assert isinstance(restored[0]["applied_position"], int)
        assert restored[0]["applied_position"] >= 12_100
        assert (loop.applied_position or 0) >= 12_101
