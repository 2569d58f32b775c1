"""The admin API's ``due_lag_p99_ms`` / ``due_lag_max_ms`` per lane (shown by the dashboard):
how late the due, not yet admitted, timeline entries are, exact across shards."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from nereus.engine.admin.status_views import due_lag_ms
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


def test_p99_and_max_over_both_shards() -> None:
    """100 due entries over two shards: max is the oldest, p99 the 2nd oldest (nearest
    rank); entries not yet due and other lanes do not count."""
    now = 1_000_000
    a = _loop("pay", [now - 500_000, *range(now - 1000, now - 941), now + 5])
    b = _loop("pay", [now - 400_000, *range(now - 800, now - 761)])
    assert due_lag_ms([a, b], "pay", now, backlog=100) == (400_000, 500_000)
    assert a.store.reads <= 2 and b.store.reads <= 2  # only the oldest 1 % is read
    # 200 due: the p99 is the 3rd oldest (ceil(0.99 * 200) = 198th of 200 ascending)
    c = _loop("pay", [*range(now - 1000, now - 900)])
    assert due_lag_ms([a, b, c], "pay", now, backlog=200) == (1000, 500_000)


def test_no_backlog_has_no_lag_and_a_single_entry_is_both() -> None:
    """Nothing due gives (None, None); one due entry is its own p99 and max."""
    assert due_lag_ms([_loop("pay", [50])], "pay", 10, backlog=0) == (None, None)
    assert due_lag_ms([_loop("pay", [40])], "pay", 100, backlog=1) == (60, 60)


def test_the_scheduler_floor_skips_entries_known_to_be_gone() -> None:
    """A scan starts at the planner's floor for the lane, like the backlog count."""
    loop = _loop("pay", [10, 20, 30], floor=keys.timeline_key("pay", 20, ""))
    assert due_lag_ms([loop], "pay", 100, backlog=2) == (80, 80)
