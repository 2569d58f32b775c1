"""The embedded file Shard Log: the backend contract, segments and broker time.

Segments roll over and reads cross them, and broker time never runs backwards. What only
files can get wrong has modules of its own: a torn tail and damage
(``test_file_shardlog_damage.py``), several writers at once
(``test_file_shardlog_concurrency.py``).
"""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.framing import HEADER_SIZE
from tests.integration.file_segments import OpenFileLog, log_path_for, positions
from tests.integration.shardlog_contract import ShardLogContract, payloads, read_all


class TestFileShardLog(ShardLogContract):
    """The file log keeps every promise of the Shard Log contract."""

    def make_log(self, tmp_path: Path) -> FileShardLog:
        return FileShardLog(tmp_path / "log" / "default" / "0")


class TestFileShardLogSmallSegments(ShardLogContract):
    """The contract again, with segments so small that most appends roll over."""

    def make_log(self, tmp_path: Path) -> FileShardLog:
        return FileShardLog(tmp_path / "log" / "default" / "0", segment_bytes=64)


# segments --------------------------------------------------------------------------------
def test_segment_rollover_keeps_positions_continuous(
    open_file_log: OpenFileLog,
) -> None:
    """Small segments roll over; each is named by its first position; reads cross them."""
    log = open_file_log(segment_bytes=200)
    sent = payloads("roll", 60)
    receipts = []
    for i in range(0, len(sent), 7):
        receipts += log.append(sent[i:i + 7])
    assert positions(receipts) == list(range(60))

    segments = log.segments()
    assert len(segments) > 5
    reader = open_file_log(segment_bytes=200)
    records = read_all(reader)
    assert [r.payload for r in records] == sent
    assert positions(records) == list(range(60))
    # every segment starts at the position after the previous one ends, and holds frames
    # of at most segment_bytes unless a single frame is larger
    expected_base = 0
    for base, path in segments:
        assert base == expected_base
        data = path.read_bytes()
        count, at = 0, 0
        while at < len(data):
            at += HEADER_SIZE + int.from_bytes(data[at:at + 4], "big")
            count += 1
        assert at == len(data)
        assert len(data) <= 200 or count == 1
        expected_base += count
    assert expected_base == 60
    # reads starting inside each segment and spanning the rest
    for start in (0, 5, 13, 29, 59):
        assert [r.payload for r in read_all(reader, start, batch=3)] == sent[start:]


def test_frame_larger_than_a_segment_gets_a_segment_of_its_own(
    open_file_log: OpenFileLog,
) -> None:
    """A payload bigger than segment_bytes is still appended whole, then the log rolls on."""
    log = open_file_log(segment_bytes=100)
    sent = [b"small", b"B" * 500, b"after"]
    assert positions(log.append(sent)) == [0, 1, 2]
    assert [r.payload for r in read_all(open_file_log(segment_bytes=100))] == sent
    assert [base for base, _ in log.segments()] == [0, 1, 2]


# time ------------------------------------------------------------------------------------
def test_clock_going_backwards_still_gives_non_decreasing_broker_time(
    open_file_log: OpenFileLog,
) -> None:
    """An injected clock that jumps back never makes broker_ms go back, in the receipts,
    in what readers see, or for a writer opened later with an even earlier clock."""
    ticks = iter([1_000, 2_000, 1_500, 500, 3_000, 2_999, 3_001])
    log = open_file_log(clock_ms=lambda: next(ticks), segment_bytes=90)
    stamped = [log.append([f"r{i}".encode(), b"pad" * i])[0].broker_ms for i in range(7)]
    assert stamped == [1_000, 2_000, 2_000, 2_000, 3_000, 3_000, 3_001]
    assert len(log.segments()) > 2
    times = [r.broker_ms for r in read_all(open_file_log())]
    assert times == sorted(times) and times[-1] == 3_001

    late = open_file_log(clock_ms=lambda: 10, segment_bytes=90)
    assert late.append([b"late"])[0].broker_ms == 3_001


def test_clock_going_backwards_after_a_crash_right_after_rollover(
    open_file_log: OpenFileLog,
) -> None:
    """A writer that crashed after creating a new segment but before writing into it leaves
    an empty last segment; the next writer still stamps no earlier than the log's last."""
    log = open_file_log(clock_ms=lambda: 5_000)
    log.append(payloads("a", 3))
    log_path_for(log, 3).touch()  # the rolled, still empty segment

    backwards = open_file_log(clock_ms=lambda: 4_000)
    receipt = backwards.append([b"after"])[0]
    assert (receipt.position, receipt.broker_ms) == (3, 5_000)
    times = [r.broker_ms for r in read_all(open_file_log())]
    assert times == [5_000] * 4
