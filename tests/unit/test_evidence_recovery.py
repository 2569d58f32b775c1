"""The evidence scanner needs shard views, destinations and a clock, never the engine.

A shard here is a small view over a real ShardStore holding one UNKNOWN attempt (applied
with the real state machine); its destination says whether the attempt's record landed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from nereus import records as r
from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.engine.process.evidence_scan import MAX_SPAN_MS, WINDOW_BEFORE_MS, EvidenceRecovery
from nereus.engine.shard.loop_status import ShardState
from nereus.evidence_mac import ExpectedMac
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from nereus.testing import MemoryShard
from tests.fake_clock import FakeClock
from tests.polling import wait_until
from tests.unit.builders import admission, outcome, schedule

SHARD = ShardId("default", 0)
ADMITTED_MS = 5_000


class ShardView:
    """A shard as the scanner sees it: state, store, MACs, and where results go."""

    def __init__(self, store: ShardStore, state: ShardState = ShardState.ACTIVE) -> None:
        self.shard = SHARD
        self.store = store
        self.state = state
        self.replies: list[PublishResult] = []

    def evidence_mac(self, delay_message_id: str, generation: int, attempt_id: str) -> str:
        return f"mac-{delay_message_id}-{generation}-{attempt_id}"

    def reply(self, result: PublishResult, /) -> None:
        self.replies.append(result)


class Landed:
    """A destination that holds the records of ``landed`` attempts."""

    name = "local"
    max_record_bytes: int | None = None

    def __init__(self, landed: set[str]) -> None:
        self.landed = landed
        self.scans: list[tuple[dict[str, ExpectedMac], int, int]] = []
        self.scanned = threading.Event()

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        raise AssertionError("the scanner never publishes")

    def probe(self) -> str | None:
        return None

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        self.scans.append((dict(wanted), since_ms, until_ms))
        self.scanned.set()
        return {attempt_id: f"outbox@{n}" for n, attempt_id in enumerate(sorted(wanted))
                if attempt_id in self.landed}

    def close(self) -> None:
        pass


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShardStore]:
    """A shard whose attempt ``a1`` (message ``m1``, lane ``local``) is UNKNOWN."""
    memory = MemoryShard()
    assert memory.result(schedule("m1", 1_000)).status == r.ResultStatus.APPLIED
    assert memory.result(admission(memory, "m1", "a1"),
                         broker_ms=ADMITTED_MS).status == r.ResultStatus.APPLIED
    assert memory.result(outcome("m1", "a1", r.Outcome.UNKNOWN)).status == \
        r.ResultStatus.APPLIED
    identity = Identity(route=SHARD.route, partition=SHARD.partition,
                        schema_version=keys.SCHEMA_VERSION)
    with ShardStore.open(tmp_path / "state", identity=identity, create=True) as opened:
        opened.write(dict(memory.data))
        yield opened


def test_a_landed_unknown_attempt_is_settled_from_views_alone(store: ShardStore) -> None:
    """One scan: the destination is asked for the attempt with the shard's MAC, from the
    window before its admission to the clock's now; what it found goes back to the shard as
    PUBLISHED, and the search is kept with the clock's time."""
    view, destination = ShardView(store), Landed({"a1"})
    clock = FakeClock(wall_ms=90_000)
    scanner = EvidenceRecovery({SHARD: view}, {"local": destination}, clock=clock)
    assert scanner.scan_once() == 1
    assert destination.scans == [({"a1": "mac-m1-1-a1"}, ADMITTED_MS - WINDOW_BEFORE_MS,
                                  90_000)]
    (result,) = view.replies
    assert (result.attempt_id, result.outcome) == ("a1", r.Outcome.PUBLISHED)
    assert result.evidence == "evidence scan: outbox@0"
    assert scanner.searches["a1"].at_ms == 90_000 and scanner.settled == 1


def test_shards_that_are_not_active_and_lanes_without_a_destination_are_skipped(
        store: ShardStore) -> None:
    """A STOPPING shard is not scanned; an ACTIVE one whose lane has no destination is not
    either; nothing is settled and nothing is asked."""
    destination = Landed({"a1"})
    stopping = EvidenceRecovery({SHARD: ShardView(store, ShardState.STOPPING)},
                                {"local": destination}, clock=FakeClock())
    unconfigured = EvidenceRecovery({SHARD: ShardView(store)}, {"other": destination},
                                    clock=FakeClock())
    assert stopping.scan_once() == 0 and unconfigured.scan_once() == 0
    assert destination.scans == []


@pytest.mark.timeout(30)
def test_the_scan_interval_passes_on_the_clock(store: ShardStore) -> None:
    """With an hour's interval on a FakeClock the scanner waits on the clock and scans
    nothing until it is advanced an hour; then it scans at once and settles the attempt."""
    view, destination = ShardView(store), Landed({"a1"})
    clock = FakeClock()
    scanner = EvidenceRecovery({SHARD: view}, {"local": destination}, clock=clock,
                               interval_s=3600)
    scanner.start()
    try:
        wait_until("the scanner's wait", lambda: clock.waiters == 1, 5)
        clock.advance(3599)
        assert destination.scans == [] and view.replies == []
        clock.advance(1)
        assert destination.scanned.wait(5)
        wait_until("the settled attempt", lambda: view.replies, 5)
    finally:
        scanner.stop()
    assert [reply.attempt_id for reply in view.replies] == ["a1"]


def test_an_attempt_unknown_for_days_costs_each_scan_only_the_time_since_the_last(
        store: ShardStore) -> None:
    """An UNKNOWN attempt whose record never lands, scanned every 5 s for two days: after
    it has caught up on the history since its admission (passes of an hour at most), each
    search reads the last 5 s and the overlap window, not everything back to the
    admission (before, every pass read from the admission to now: two days by the end)."""
    view, destination = ShardView(store), Landed(set())
    clock = FakeClock(wall_ms=ADMITTED_MS + 2 * 86_400_000)
    scanner = EvidenceRecovery({SHARD: view}, {"local": destination}, clock=clock)
    passes = 0
    while True:  # catching up: each pass an hour at most, run back to back
        scanner.scan_once()
        passes += 1
        if not scanner.behind:
            break
    assert passes == 49
    assert all(until - since <= MAX_SPAN_MS for _, since, until in destination.scans)
    destination.scans.clear()
    for _ in range(100):
        clock.advance(5)
        scanner.scan_once()
    spans = {until - since for _, since, until in destination.scans}
    assert spans == {5_000 + WINDOW_BEFORE_MS}, spans
    assert scanner.searches["a1"].up_to_ms == clock.wall_ms()


def test_a_failed_search_does_not_move_where_the_next_one_starts(store: ShardStore) -> None:
    """A destination that fails a search: the attempt's search stays where it was, and the
    next search reads that range again."""
    view, destination = ShardView(store), Landed(set())
    clock = FakeClock(wall_ms=ADMITTED_MS + 10_000)
    scanner = EvidenceRecovery({SHARD: view}, {"local": destination}, clock=clock)
    scanner.scan_once()
    reached = scanner.searches["a1"].up_to_ms

    def broken(wanted: Mapping[str, ExpectedMac], since_ms: int, until_ms: int) -> dict[str, str]:
        raise ConnectionError("broker down")

    destination.scan_evidence = broken  # type: ignore[method-assign]
    clock.advance(30)
    scanner.scan_once()
    assert scanner.searches["a1"].error == "broker down"
    assert scanner.searches["a1"].up_to_ms == reached
    del destination.scan_evidence
    clock.advance(5)
    scanner.scan_once()
    _, since, until = destination.scans[-1]
    assert (since, until) == (reached - WINDOW_BEFORE_MS, clock.wall_ms())


def test_searches_of_settled_attempts_are_forgotten(store: ShardStore) -> None:
    """Once an attempt is no longer UNKNOWN (settled, or its shard gone) its search is not
    kept: the scanner's memory follows the UNKNOWN attempts, not every one ever seen."""
    view, destination = ShardView(store), Landed(set())
    scanner = EvidenceRecovery({SHARD: view}, {"local": destination},
                               clock=FakeClock(wall_ms=90_000))
    scanner.scan_once()
    assert set(scanner.searches) == {"a1"}
    scanner.shards = {}
    scanner.scan_once()
    assert scanner.searches == {}
