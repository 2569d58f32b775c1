"""The admin API's ``due_lag_p99_ms`` / ``due_lag_max_ms`` per lane (shown by the dashboard):
how late the due, not yet admitted, timeline entries are, exact across shards."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from nereus.engine.admin.status_views import due_lag_ms, due_sample
from nereus.state import keys


class _Store:
    """Just the ordered ``scan`` of a shard store, over an in-memory key list."""

    def __init__(self, entries: list[bytes]) -> None:
        self.keys = sorted(entries)
        self.reads = 0

    def scan(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key in self.keys[bisect.bisect_left(self.keys, start):]:
            if key >= end:
                return
            self.reads += 1
            yield key, b""


def _loop(lane: str, action_ats: list[int], floor: bytes | None = None) -> Any:
    store = _Store([keys.timeline_key(lane, at, f"m-{at}") for at in action_ats]
                   + [keys.timeline_key("other", 0, "x")])
    return SimpleNamespace(store=store, planner=SimpleNamespace(
        floors={} if floor is None else {lane: floor}))


def _lag(loops: list[Any], now: int, cap: int = 10_000) -> tuple[int | None, int | None]:
    return due_lag_ms([due_sample(loop, "pay", now, cap=cap) for loop in loops], now)


def test_p99_and_max_over_both_shards() -> None:
    """100 due entries over two shards: max is the oldest, p99 the 2nd oldest (nearest
    rank); entries not yet due and other lanes do not count."""
    now = 1_000_000
    a = _loop("pay", [now - 500_000, *range(now - 1000, now - 941), now + 5])
    b = _loop("pay", [now - 400_000, *range(now - 800, now - 761)])
    assert _lag([a, b], now) == (400_000, 500_000)
    # 200 due: the p99 is the 3rd oldest (ceil(0.99 * 200) = 198th of 200 ascending)
    c = _loop("pay", [*range(now - 1000, now - 900)])
    assert _lag([a, b, c], now) == (1000, 500_000)


def test_no_backlog_has_no_lag_and_a_single_entry_is_both() -> None:
    """Nothing due gives (None, None); one due entry is its own p99 and max."""
    assert _lag([_loop("pay", [50])], 10) == (None, None)
    assert _lag([_loop("pay", [40])], 100) == (60, 60)


def test_the_scheduler_floor_skips_entries_known_to_be_gone() -> None:
    """A scan starts at the planner's floor for the lane, like the backlog count."""
    loop = _loop("pay", [10, 20, 30], floor=keys.timeline_key("pay", 20, ""))
    assert _lag([loop], 100) == (80, 80)


def test_a_large_backlog_reads_at_most_the_cap() -> None:
    """A backlog larger than the cap reads cap + 1 keys, says so (capped), and still gives
    the exact max lag and an upper bound of the p99 (the p99 of the oldest entries read)."""
    now = 1_000_000
    loop = _loop("pay", list(range(now - 5000, now)))
    sample = due_sample(loop, "pay", now, cap=100)
    assert sample.capped and len(sample.action_ats) == 100
    assert loop.store.reads == 101
    assert sample.action_ats == list(range(now - 5000, now - 4900))
    p99, worst = due_lag_ms([sample], now)
    assert worst == 5000
    assert p99 is not None and p99 >= 4950  # the true p99 over 5000 entries is the 50th oldest
    exact = due_sample(_loop("pay", [now - 3, now - 2]), "pay", now, cap=2)
    assert not exact.capped and exact.action_ats == [now - 3, now - 2]
