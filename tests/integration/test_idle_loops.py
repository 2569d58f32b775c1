"""An idle shard loop rests (``engine/shard/idle_wait.py``) instead of polling every few
milliseconds, and still does everything on time: it wakes for the next due entry, and it
sees records another process appended to its file Shard Log (this harness appends straight
to the log, as the CLI does without an engine, so no wake-up tells the loop)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.engine_harness import in_process_engine, lateness_ms, now_ms
from tests.polling import wait_until


def test_an_idle_loop_rests_and_still_sees_records_another_process_appends(
        tmp_path: Path) -> None:
    """Nothing scheduled: the loop rests (longer than one poll); a schedule appended to its
    log behind its back is applied and published, not before deliverAt."""
    with in_process_engine(tmp_path / "home", partitions=1) as h:
        (loop,) = h.engine.shards.values()
        wait_until("the idle loop to rest", lambda: loop.idle.rests >= 2, 10)
        due = now_ms() + 300
        h.queue([h.schedule("m1", due)])
        wait_until("m1 published",
                   lambda: [line["delay_message_id"] for line in h.outbox()] == ["m1"], 10)
        assert lateness_ms(h.outbox()[0]) >= 0


def test_a_resting_loop_wakes_for_its_next_due_entry(tmp_path: Path) -> None:
    """Two messages due 1.5 s and 3 s ahead: the loop rests in between (its rests grow)
    and publishes each at its time, never early."""
    with in_process_engine(tmp_path / "home", partitions=1) as h:
        (loop,) = h.engine.shards.values()
        base = now_ms()
        h.queue([h.schedule("first", base + 1_500), h.schedule("second", base + 3_000)])
        wait_until("both published", lambda: len(h.outbox()) == 2, 15)
        published = h.outbox()
        assert [line["delay_message_id"] for line in published] == ["first", "second"]
        assert all(lateness_ms(line) >= 0 for line in published), published
        assert loop.idle.rests >= 2
        print(f"\nlateness ms: {[lateness_ms(line) for line in published]}; "
              f"rests {loop.idle.rests}")
