"""Reads that do not grow with the backlog or the history: the status document (what the
feed sends each second, ``engine status`` and ``lane list`` print) and one page of
``message list``. Each counts the keys it reads from a real RocksDB store through a spy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nereus import records as r
from nereus.engine.admin.status_views import (
    DUE_SCAN_CAP,
    StatusReads,
    lane_views,
    shard_views,
)
from nereus.engine.process.log_heads import LogHeads
from nereus.errors import UsageError
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity, Lane, WorkRef, encode_value
from nereus.testing import MemoryShard
from nereus.views import (
    MESSAGE_PAGE_SKIPS,
    decode_cursor,
    encode_cursor,
    message_page,
)
from tests.unit.builders import admission, cancel, outcome, schedule

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
NOW_MS = 10_000_000_000


class CountingStore:
    """A ShardStore whose reads are counted: keys yielded by scans, and point gets."""

    def __init__(self, store: ShardStore) -> None:
        self.store = store
        self.keys_read = 0

    def scan(self, start: bytes, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        for pair in self.store.scan(start, end):
            self.keys_read += 1
            yield pair

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self.scan(prefix, keys.prefix_end(prefix))

    def get(self, key: bytes) -> bytes | None:
        self.keys_read += 1
        return self.store.get(key)


def _backlog_store(path: Path, due: int, uncertain: int = 7) -> ShardStore:
    """A shard whose lane ``local`` has ``due`` timeline entries due now (one per ms before
    NOW_MS) and 10 in the future, written straight into the store, with the lane's counters
    as ``apply`` would keep them."""
    store = ShardStore.open(path, identity=IDENTITY, create=True)
    ref = encode_value(WorkRef(1, "PUBLISH", "0" * 32, 0))
    batch: dict[bytes, bytes | None] = {}
    times = [NOW_MS - due + n for n in range(due)] + [NOW_MS + 1 + n for n in range(10)]
    for n, at in enumerate(times):
        batch[keys.timeline_key("local", at, f"m{n:09d}")] = ref
        if len(batch) >= 50_000:
            store.write(batch, sync=False)
            batch = {}
    lane = Lane(name="local", counts={"SCHEDULED": due + 10, "UNCERTAIN": uncertain},
                open_attempts=uncertain)
    batch[keys.lane_key("local")] = encode_value(lane)
    store.write(batch)
    return store


def _engine(store: Any) -> Any:
    """Just what the status views read of an engine with one shard and one lane."""
    status = SimpleNamespace(state=SimpleNamespace(value="ACTIVE"), epoch=1, applied_position=9,
                             claims=0, in_flight=0, admissions=0, error=None, waiting=None)
    loop = SimpleNamespace(store=store, status=lambda: status, planner=SimpleNamespace(floors={}),
                           log=SimpleNamespace(end_position=lambda: 10, dense=True),
                           due_waiting=lambda lane: None)
    publisher = SimpleNamespace(ready=True, not_ready_reason=None, published=0, failures=0)
    now = SimpleNamespace(earliest_ms=NOW_MS)
    return SimpleNamespace(
        shards={ShardId("default", 0): loop}, refused={}, publishers={"local": publisher},
        log_heads=LogHeads(monotonic=time.monotonic),
        clock=SimpleNamespace(now=lambda: now),
        permits=SimpleNamespace(in_flight=lambda name: 0),
        config=SimpleNamespace(
            lanes={"local": SimpleNamespace(destination="file", fencing_kind=None)}, source="x"))


def _status_reads(path: Path, due: int) -> tuple[int, Any, Any]:
    """Keys one status document reads (shards and lanes, as ``status`` builds them), and
    the shard's and lane's views."""
    with _backlog_store(path, due) as store:
        spy = CountingStore(store)
        engine = _engine(spy)
        reads = StatusReads(engine)
        (shard,) = shard_views(engine, reads)
        (lane,) = lane_views(engine, reads)
        return spy.keys_read, shard, lane


def test_a_status_document_reads_the_same_at_ten_times_the_backlog(tmp_path: Path) -> None:
    """20,000 and 200,000 due entries cost one status document the same reads (at most
    the cap and a few lane keys), report "at least" the cap (due_backlog_capped), the exact
    max lag, an upper bound of the p99, and UNCERTAIN from the lane's counters."""
    small, shard, lane = _status_reads(tmp_path / "small", 20_000)
    large, shard10, lane10 = _status_reads(tmp_path / "large", 200_000)
    assert small == large <= DUE_SCAN_CAP + 5
    for s, l_, due in ((shard, lane, 20_000), (shard10, lane10, 200_000)):
        assert (s.due_backlog, s.due_backlog_capped) == (DUE_SCAN_CAP, True)
        assert (l_.due_backlog, l_.due_backlog_capped) == (DUE_SCAN_CAP, True)
        assert l_.shards[0].due_backlog_capped
        assert l_.due_lag_max_ms == due  # the oldest entry, NOW_MS - due
        assert l_.due_lag_p99_ms is not None and l_.due_lag_p99_ms <= due
        assert s.uncertain == 7 and l_.messages_by_state["UNCERTAIN"] == 7


def test_a_scan_bounded_by_a_key_built_in_the_call_stops_at_it(tmp_path: Path) -> None:
    """``ShardStore.scan(start, prefix + u64(ms))`` reads up to that bound even when the
    caller keeps no reference to it and allocates keys of its size while iterating
    (rocksdict points into the bound's bytes; the store keeps them alive). Without the
    store's spy in between, the status views count the same as with it."""
    with _backlog_store(tmp_path / "db", 20_000) as store:
        prefix = keys.timeline_lane_prefix("local")
        seen = [key[:] + b"" for key, _ in store.scan(prefix, prefix + keys.u64(NOW_MS + 1))]
        assert len(seen) == 20_000
        engine = _engine(store)
        (shard,) = shard_views(engine)
        assert (shard.due_backlog, shard.due_backlog_capped) == (DUE_SCAN_CAP, True)
        assert sum(1 for _ in store.scan_prefix(keys.TIMELINE)) == 20_010


def test_a_backlog_under_the_cap_is_counted_exactly(tmp_path: Path) -> None:
    """Below the cap the backlog and the p99 are exact (the 1st of 500 entries due is the
    p99 by nearest rank: ceil(0.99 * 500) = 495th ascending, the 6th oldest)."""
    _, shard, lane = _status_reads(tmp_path / "db", 500)
    assert (shard.due_backlog, shard.due_backlog_capped) == (500, False)
    assert (lane.due_backlog, lane.due_backlog_capped) == (500, False)
    assert (lane.due_lag_p99_ms, lane.due_lag_max_ms) == (500 - 5, 500)


def _history(tmp_path: Path, count: int) -> ShardStore:
    """A shard with ``count`` messages in lanes ``a`` and ``b`` (every 10th cancelled),
    applied by the real state machine, then written into a RocksDB store."""
    shard = MemoryShard(identity=IDENTITY)
    for n in range(count):
        shard.apply(schedule(f"m{n:05d}", 5_000 + n, lane="a" if n % 3 else "b"))
        if n % 10 == 0:
            shard.apply(cancel(f"m{n:05d}"))
    store = ShardStore.open(tmp_path / "history", identity=IDENTITY, create=True)
    store.write({k: v for k, v in shard.data.items() if k != keys.META_IDENTITY})
    return store


def _all_pages(store: Any, *, state: str | None, lane: str | None, limit: int,
               budget: int) -> tuple[list[str], list[int]]:
    """Every page of one shard, cursor to cursor: the ids, and the keys each page read."""
    ids: list[str] = []
    reads: list[int] = []
    after: str | None = None
    while True:
        before = store.keys_read
        page = message_page(store, "default/0", state=state, lane=lane, limit=limit,
                            after=after, budget=budget)
        reads.append(store.keys_read - before)
        assert page.examined <= budget
        ids += [m.delay_message_id for m in page.messages]
        if page.resume_after is None:
            return ids, reads
        after = decode_cursor(encode_cursor("default/0", page.resume_after))[1]


def test_message_pages_are_bounded_and_list_each_message_once(tmp_path: Path) -> None:
    """Paging a shard of 600 messages lists each once, in id order, with or without
    filters; no page reads more than its limit plus the skip budget (and a few lane keys),
    however long the history."""
    with _history(tmp_path, 600) as store:
        spy = CountingStore(store)
        ids, reads = _all_pages(spy, state=None, lane=None, limit=25, budget=25 + 10)
        assert ids == [f"m{n:05d}" for n in range(600)]
        assert max(reads) <= 25 + 2
        cancelled, reads = _all_pages(spy, state="CANCELLED", lane=None, limit=7, budget=40)
        assert cancelled == [f"m{n:05d}" for n in range(0, 600, 10)]
        assert max(reads) <= 40 + 3  # a short page still ends with a cursor
        in_b, _ = _all_pages(spy, state="SCHEDULED", lane="b", limit=9, budget=100)
        assert in_b == [f"m{n:05d}" for n in range(600) if n % 3 == 0 and n % 10]


def test_counters_skip_a_shard_with_no_match_and_obligations_index_open_states(
        tmp_path: Path) -> None:
    """A state no lane counts (or an unknown lane) reads the lane values only; the
    UNCERTAIN/PUBLISHING states read the obligations (none here), not the messages."""
    with _history(tmp_path, 300) as store:
        spy: Any = CountingStore(store)  # a ShardStore as far as the reads go
        page = message_page(spy, "default/0", state="PUBLISHED", lane=None, limit=10,
                            after=None, budget=MESSAGE_PAGE_SKIPS)
        assert (page.messages, page.resume_after, page.examined) == ([], None, 0)
        assert spy.keys_read <= 2  # the lane values a and b
        for state, lane in (("UNCERTAIN", None), (None, "nope")):
            page = message_page(spy, "default/0", state=state, lane=lane, limit=10,
                                after=None, budget=MESSAGE_PAGE_SKIPS)
            assert page.examined == 0 and page.resume_after is None


def test_a_cursor_round_trips_and_garbage_is_a_usage_error() -> None:
    """encode_cursor / decode_cursor agree on any id; anything else exits 2 (UsageError)."""
    assert decode_cursor(encode_cursor("orders/3", "id with spaces/é")) == (
        "orders/3", "id with spaces/é")
    for bad in ("not-a-cursor", "", "W10"):
        with pytest.raises(UsageError):
            decode_cursor(bad)


def test_open_states_are_listed_through_the_obligations(tmp_path: Path) -> None:
    """PUBLISHING and UNCERTAIN messages are read through the obligations (one per open
    attempt), not the whole history: a page over 200 messages with 2 admitted and 1 of them
    UNKNOWN examines 2 and 1 keys."""
    shard = MemoryShard(identity=IDENTITY)
    for n in range(200):
        shard.apply(schedule(f"m{n:05d}", 1_000))
    for mid in ("m00042", "m00117"):
        assert shard.result(admission(shard, mid, f"a-{mid}"), broker_ms=1_000).status == \
            r.ResultStatus.APPLIED
    shard.apply(outcome("m00117", "a-m00117", r.Outcome.UNKNOWN))
    with ShardStore.open(tmp_path / "open", identity=IDENTITY, create=True) as store:
        store.write({k: v for k, v in shard.data.items() if k != keys.META_IDENTITY})
        for state, expected in (("PUBLISHING", ["m00042"]), ("UNCERTAIN", ["m00117"])):
            page = message_page(store, "default/0", state=state, lane=None, limit=10,
                                after=None, budget=MESSAGE_PAGE_SKIPS)
            assert [m.delay_message_id for m in page.messages] == expected
            assert page.examined == 2 and page.resume_after is None
