"""A running engine paces its due checkpoints by ``[checkpoints] max_share``: with a share of
1 a checkpoint is taken every ``every_records`` as soon as the last one is catalogued; with
a tiny share the one taken first holds the next back, of any shard of the process
(``engine.checkpoint_pacing.Pacing``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nereus.engine.shard.owner_loop import ShardLoop
from nereus.shard import partition_for
from tests.integration.engine_harness import (
    Events,
    Harness,
    file_lane,
    in_process_engine,
    now_ms,
)
from tests.polling import wait_until

GROUPS = 4
GROUP = 150  # more than every_records (100): each group makes a checkpoint due


def _lanes(max_share: float) -> str:
    return (file_lane("local", "outbox/local.jsonl")
            + f"\n[checkpoints]\nevery_records = 100\nmax_share = {max_share}\n")


def _apply(h: Harness, loop: ShardLoop, group: int, first: int) -> None:
    h.queue([h.schedule(f"m-{group}-{n}", now_ms() + 3_600_000) for n in range(GROUP)])
    wait_until(f"group {group} applied",
               lambda: (loop.applied_position or 0) >= first + (group + 1) * GROUP, 30)


def _more_than(events: Events, count: int) -> Callable[[], bool]:
    return lambda: len(events.named("checkpoint_taken")) > count


def test_a_share_of_one_takes_a_checkpoint_every_due_group(tmp_path: Path) -> None:
    """max_share = 1: each group's checkpoint is taken as soon as the last is catalogued."""
    events = Events()
    with in_process_engine(tmp_path, partitions=1, lanes=_lanes(1.0), log_event=events) as h:
        (loop,) = h.engine.shards.values()
        first = loop.applied_position or 0
        for group in range(GROUPS):
            _apply(h, loop, group, first)
            wait_until(f"the checkpoint of group {group}", _more_than(events, group), 30)
        assert loop.checkpoints.changed < GROUP


def test_a_tiny_share_holds_the_next_due_checkpoint_back(tmp_path: Path) -> None:
    """max_share = 0.0001: once the first is catalogued (it took some milliseconds, so the
    next waits ten thousand times that), three more groups are applied and no checkpoint
    resets the count of records since it."""
    events = Events()
    with in_process_engine(tmp_path, partitions=1, lanes=_lanes(0.0001), log_event=events) as h:
        (loop,) = h.engine.shards.values()
        first = loop.applied_position or 0
        _apply(h, loop, 0, first)
        wait_until("the first checkpoint", lambda: len(events.named("checkpoint_taken")) == 1, 30)
        for group in range(1, GROUPS):
            _apply(h, loop, group, first)
        wait_until("the later groups counted since the first checkpoint",
                   lambda: loop.checkpoints.changed >= (GROUPS - 1) * GROUP, 30)
        assert len(events.named("checkpoint_taken")) == 1


def test_a_tiny_share_paces_the_shards_of_a_process_together(tmp_path: Path) -> None:
    """Two shards of one process, both due at once (GROUP records each), max_share =
    0.0001: one checkpoint is taken, of one of them, and the other shard's records stay
    counted since none (the process's due checkpoints share one budget)."""
    events = Events()
    with in_process_engine(tmp_path, partitions=2, lanes=_lanes(0.0001), log_event=events) as h:
        ids: dict[int, list[str]] = {0: [], 1: []}
        n = 0
        while min(len(found) for found in ids.values()) < GROUP:
            ids[partition_for(f"m-{n}", 2)].append(f"m-{n}")
            n += 1
        h.queue([h.schedule(mid, now_ms() + 3_600_000)
                 for found in ids.values() for mid in found[:GROUP]])
        loops = [loop for _, loop in sorted(h.engine.shards.items())]
        wait_until("a checkpoint", lambda: len(events.named("checkpoint_taken")) == 1, 30)
        wait_until("both shards' groups applied",
                   lambda: all((loop.applied_position or 0) >= GROUP for loop in loops), 30)
        (taken,) = events.named("checkpoint_taken")
        waiting = [loop for loop in loops if str(loop.shard) != taken["shard"]]
        assert len(waiting) == 1 and waiting[0].checkpoints.changed >= GROUP
        assert len(events.named("checkpoint_taken")) == 1
