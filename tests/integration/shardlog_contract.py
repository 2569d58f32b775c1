"""The contract every Shard Log backend passes (STYLE, habit 3).

A backend's test module subclasses ``ShardLogContract`` as ``Test<Backend>ShardLog`` and
implements ``make_log(tmp_path)``. Calling ``make_log`` twice with the same ``tmp_path``
must return two independent log objects on the SAME partition (the re-open tests rely on
it); each call's log is closed by the contract's fixtures, not by the backend.

Nothing here knows how a backend stores records: only the ``ShardLog`` protocol is used,
so the file log today and Kafka and Pulsar later are held to the same promises.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt, ShardLog
from tests.polling import wait_until

MakeLog = Callable[[], ShardLog]


def read_all(log: ShardLog, from_position: int = 0, *, batch: int = 1_000) -> list[LogRecord]:
    """Every record from ``from_position`` to the end, reading ``batch`` at a time."""
    out: list[LogRecord] = []
    position = from_position
    while True:
        got = log.read(position, batch)
        if not got:
            return out
        out.extend(got)
        position = got[-1].position + 1


def payloads(prefix: str, count: int) -> list[bytes]:
    """``count`` distinct payloads, of varied lengths, tagged with ``prefix``."""
    return [f"{prefix}-{i}-".encode() + b"x" * (i % 7) for i in range(count)]


class ShardLogContract(abc.ABC):
    """Promises of the Shard Log protocol, checked against one backend."""

    @abc.abstractmethod
    def make_log(self, tmp_path: Path) -> ShardLog:
        """A log on the partition that belongs to ``tmp_path`` (same path: same partition)."""

    @pytest.fixture
    def open_log(self, tmp_path: Path) -> Iterator[MakeLog]:
        """Opens logs on this test's partition and closes them all at teardown."""
        opened: list[ShardLog] = []

        def opener() -> ShardLog:
            log = self.make_log(tmp_path)
            opened.append(log)
            return log

        yield opener
        for log in opened:
            log.close()

    @pytest.fixture
    def log(self, open_log: MakeLog) -> ShardLog:
        return open_log()

    # append -----------------------------------------------------------------------------
    def test_new_log_is_empty(self, log: ShardLog) -> None:
        """A new partition has end position 0 and reading it returns nothing."""
        assert log.end_position() == 0
        assert log.read(0, 10) == []

    def test_append_returns_one_receipt_per_payload_with_consecutive_positions(
        self, log: ShardLog
    ) -> None:
        """append gives one receipt per payload, numbered on from end_position()."""
        start = log.end_position()
        receipts = log.append(payloads("a", 5))
        assert [r.position for r in receipts] == list(range(start, start + 5))
        assert all(isinstance(r, Receipt) for r in receipts)
        more = log.append(payloads("b", 3))
        assert [r.position for r in more] == list(range(start + 5, start + 8))

    def test_empty_append_returns_no_receipts(self, log: ShardLog) -> None:
        """Appending nothing returns [] and leaves the log as it was."""
        assert log.append([]) == []
        log.append([b"one"])
        assert log.append([]) == []
        assert log.end_position() == 1
        assert [r.payload for r in read_all(log)] == [b"one"]

    def test_end_position_follows_appends(self, log: ShardLog) -> None:
        """end_position is the position the next record gets: the number appended."""
        assert log.end_position() == 0
        log.append(payloads("a", 4))
        assert log.end_position() == 4
        receipts = log.append(payloads("b", 6))
        assert log.end_position() == 10 == receipts[-1].position + 1

    def test_empty_payload_round_trips(self, log: ShardLog) -> None:
        """A zero-length payload is a record like any other, not an end marker."""
        log.append([b"", b"after"])
        assert [r.payload for r in read_all(log)] == [b"", b"after"]

    # read -------------------------------------------------------------------------------
    def test_read_from_zero_returns_everything_in_order(self, log: ShardLog) -> None:
        """read(0) gives every record in order, with the payloads and receipts' times."""
        sent = payloads("a", 7) + payloads("b", 1) + payloads("c", 12)
        receipts = log.append(sent[:7]) + log.append(sent[7:8]) + log.append(sent[8:])
        records = read_all(log)
        assert [r.position for r in records] == list(range(len(sent)))
        assert [r.payload for r in records] == sent
        assert [(r.position, r.broker_ms) for r in records] == [
            (r.position, r.broker_ms) for r in receipts
        ]

    def test_read_from_a_middle_position(self, log: ShardLog) -> None:
        """read(p) starts exactly at position p, for every p in the log."""
        sent = payloads("m", 15)
        log.append(sent[:6])
        log.append(sent[6:])
        for start in range(len(sent)):
            records = read_all(log, start, batch=4)
            assert [r.position for r in records] == list(range(start, len(sent)))
            assert [r.payload for r in records] == sent[start:]

    def test_read_respects_max_records(self, log: ShardLog) -> None:
        """read never returns more than max_records, and never skips ahead."""
        sent = payloads("r", 10)
        log.append(sent)
        for limit in (1, 3, 10, 50):
            got = log.read(2, limit)
            assert 0 < len(got) <= limit
            assert [r.position for r in got] == list(range(2, 2 + len(got)))
        assert read_all(log, 0, batch=1) == read_all(log)

    def test_read_at_or_past_the_end_returns_nothing(self, log: ShardLog) -> None:
        """Reading from end_position() (or beyond) returns [] rather than failing."""
        log.append(payloads("e", 3))
        assert log.read(3, 10) == []
        assert log.read(100, 10) == []

    def test_reader_sees_records_appended_after_it_caught_up(self, log: ShardLog) -> None:
        """A reader that reached the end picks up later appends from the same position."""
        log.append(payloads("a", 3))
        assert len(read_all(log)) == 3
        assert log.read(3, 10) == []
        log.append(payloads("b", 2))
        # a read may return none yet (a broker's consumer fetches in the background): the
        # contract is that the records come, from the same position, in order
        seen: list[LogRecord] = []

        def read_more() -> bool:
            seen.extend(log.read(seen[-1].position + 1 if seen else 3, 10))
            return len(seen) >= 2
        wait_until("the later appends read from position 3", read_more, 10, interval_s=0.02)
        assert [r.payload for r in seen] == payloads("b", 2)

    # time -------------------------------------------------------------------------------
    def test_broker_time_never_decreases(self, log: ShardLog) -> None:
        """broker_ms is non-decreasing in position order, within and across appends."""
        receipts: list[Receipt] = []
        for i in range(20):
            receipts += log.append(payloads(f"t{i}", 1 + i % 3))
        times = [r.broker_ms for r in receipts]
        assert times == sorted(times)
        assert [r.broker_ms for r in read_all(log)] == times

    # re-open ----------------------------------------------------------------------------
    def test_second_log_object_sees_the_records(self, open_log: MakeLog) -> None:
        """A log opened later on the same partition reads everything the first appended."""
        first = open_log()
        sent = payloads("a", 9)
        receipts = first.append(sent)
        second = open_log()
        assert second.end_position() == 9
        records = read_all(second)
        assert [r.payload for r in records] == sent
        assert [r.broker_ms for r in records] == [r.broker_ms for r in receipts]

    def test_appends_from_two_log_objects_interleave_without_gaps(
        self, open_log: MakeLog
    ) -> None:
        """Two objects appending in turn share one position sequence: no gap, no reuse."""
        first, second = open_log(), open_log()
        got = []
        for i in range(6):
            writer = first if i % 2 == 0 else second
            got += writer.append([f"w{i}-{j}".encode() for j in range(i + 1)])
        positions = [r.position for r in got]
        assert positions == list(range(len(positions)))
        for log in (first, second):
            assert log.end_position() == len(positions)
            assert [r.position for r in read_all(log)] == positions

    def test_time_stays_monotonic_after_reopen(self, open_log: MakeLog) -> None:
        """A log re-opened on a partition never stamps earlier than what is there."""
        before = open_log().append(payloads("a", 3))
        after = open_log().append(payloads("b", 3))
        assert after[0].position == 3
        assert after[0].broker_ms >= before[-1].broker_ms
