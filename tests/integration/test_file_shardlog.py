"""The embedded file Shard Log: the backend contract plus what only files can get wrong.

Segments roll over, a crashed writer leaves a torn tail that the next writer cuts, damage
anywhere else is loud (``LogCorruption`` naming file and byte, never a skip), several
processes append to one partition, and broker time never runs backwards.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus.adapters.shardlog.file import FileShardLog
from nereus.adapters.shardlog.file_tail import TornTailRepair
from nereus.adapters.shardlog.protocol import LogRecord, Receipt
from nereus.errors import LogCorruption
from nereus.framing import HEADER_SIZE, encode_frame
from tests.integration.shardlog_contract import ShardLogContract, payloads, read_all

WORKER_DEADLINE_S = 60.0


class TestFileShardLog(ShardLogContract):
    """The file log keeps every promise of the Shard Log contract."""

    def make_log(self, tmp_path: Path) -> FileShardLog:
        return FileShardLog(tmp_path / "log" / "default" / "0")


class TestFileShardLogSmallSegments(ShardLogContract):
    """The contract again, with segments so small that most appends roll over."""

    def make_log(self, tmp_path: Path) -> FileShardLog:
        return FileShardLog(tmp_path / "log" / "default" / "0", segment_bytes=64)


# helpers ---------------------------------------------------------------------------------
@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "log" / "default" / "0"


@pytest.fixture
def open_file_log(log_dir: Path) -> Iterator[Callable[..., FileShardLog]]:
    """Opens file logs on ``log_dir`` (keyword arguments passed on); closes them after."""
    opened: list[FileShardLog] = []

    def opener(**kwargs: Any) -> FileShardLog:
        log = FileShardLog(log_dir, **kwargs)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


def frame_size(payload: bytes) -> int:
    return HEADER_SIZE + len(payload)


def frame_offsets(sent: list[bytes]) -> list[int]:
    """Byte offset of each payload's frame in a segment that holds exactly ``sent``."""
    offsets, at = [], 0
    for payload in sent:
        offsets.append(at)
        at += frame_size(payload)
    return offsets


def log_path_for(log: FileShardLog, base: int) -> Path:
    """Where the segment starting at position ``base`` lives (whether or not it exists)."""
    return log.directory / f"{base:020d}.seg"


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def positions(records: Sequence[LogRecord | Receipt]) -> list[int]:
    return [r.position for r in records]


# segments --------------------------------------------------------------------------------
def test_segment_rollover_keeps_positions_continuous(
    open_file_log: Callable[..., FileShardLog],
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
    open_file_log: Callable[..., FileShardLog],
) -> None:
    """A payload bigger than segment_bytes is still appended whole, then the log rolls on."""
    log = open_file_log(segment_bytes=100)
    sent = [b"small", b"B" * 500, b"after"]
    assert positions(log.append(sent)) == [0, 1, 2]
    assert [r.payload for r in read_all(open_file_log(segment_bytes=100))] == sent
    assert [base for base, _ in log.segments()] == [0, 1, 2]


# torn tail -------------------------------------------------------------------------------
PARTIAL = encode_frame(1_700_000_000_000, b"never receipted " * 4)
BAD_CRC = bytearray(encode_frame(1_700_000_000_000, b"never receipted, bad payload crc"))
BAD_CRC[-1] ^= 0xFF

TORN_TAILS = {
    "one-byte": PARTIAL[:1],
    "short-header": PARTIAL[:HEADER_SIZE - 1],
    "header-only": PARTIAL[:HEADER_SIZE],
    "payload-cut": PARTIAL[:-3],
    "garbage": b"\xde\xad\xbe\xef" * 9,
    "zeros": bytes(4096),
    "bad-payload-crc": bytes(BAD_CRC),
}


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
@pytest.mark.parametrize("segment_bytes", [1 << 20, 120], ids=["one-segment", "rolled"])
def test_torn_tail_is_invisible_to_readers_and_cut_by_the_next_writer(
    open_file_log: Callable[..., FileShardLog], tail: bytes, segment_bytes: int
) -> None:
    """Torn tail: readers stop before it; the next writer truncates it, records the repair
    (path, offset) and gives new records the next position."""
    writer = open_file_log(segment_bytes=segment_bytes)
    sent = payloads("kept", 8)
    writer.append(sent[:5])
    writer.append(sent[5:])
    writer.close()
    last = writer.segments()[-1][1]
    intact = last.stat().st_size
    with last.open("ab") as handle:
        handle.write(tail)

    reader = open_file_log(segment_bytes=segment_bytes)
    for _ in range(2):  # a fresh reader, then the same reader again
        assert [r.payload for r in read_all(reader)] == sent
        assert reader.read(8, 10) == []
    assert last.stat().st_size == intact + len(tail)  # reading repairs nothing

    repairer = open_file_log(segment_bytes=segment_bytes)
    receipts = repairer.append([b"next"])
    assert positions(receipts) == [8]
    assert len(repairer.repairs) == 1
    repair = repairer.repairs[0]
    assert isinstance(repair, TornTailRepair)
    assert (repair.path, repair.offset, repair.dropped_bytes) == (str(last), intact, len(tail))
    assert repair.problem
    assert last.stat().st_size == intact + frame_size(b"next")

    assert [r.payload for r in read_all(reader, 0)] == [*sent, b"next"]
    assert [r.payload for r in read_all(open_file_log())] == [*sent, b"next"]
    assert repairer.append([b"again"])[0].position == 9
    assert len(repairer.repairs) == 1


def test_torn_tail_that_is_a_whole_new_segment(
    open_file_log: Callable[..., FileShardLog],
) -> None:
    """A writer that rolled and then crashed mid-frame leaves a segment holding only a torn
    frame: it is cut to empty and the next record takes the segment's base position."""
    writer = open_file_log(segment_bytes=1 << 20)
    sent = payloads("kept", 4)
    first = writer.append(sent)
    torn_segment = log_path_for(writer, 4)
    torn_segment.write_bytes(PARTIAL[:-1])

    assert [r.payload for r in read_all(open_file_log())] == sent
    clock = iter([first[-1].broker_ms - 5_000])
    repairer = open_file_log(clock_ms=lambda: next(clock))
    receipt = repairer.append([b"next"])[0]
    assert receipt.position == 4
    assert receipt.broker_ms >= first[-1].broker_ms
    assert [(r.path, r.offset) for r in repairer.repairs] == [(str(torn_segment), 0)]
    assert [r.payload for r in read_all(open_file_log())] == [*sent, b"next"]


def test_writer_with_a_cached_tail_still_cuts_a_torn_tail(
    open_file_log: Callable[..., FileShardLog],
) -> None:
    """A long-lived writer whose cached tail predates another writer's crash cuts the torn
    bytes too, rather than trusting its cache."""
    steady = open_file_log()
    steady.append(payloads("a", 3))
    crashed = open_file_log()
    crashed.append(payloads("b", 2))
    last = steady.segments()[-1][1]
    intact = last.stat().st_size
    with last.open("ab") as handle:
        handle.write(PARTIAL[:30])
    assert steady.append([b"c"])[0].position == 5
    assert [(r.path, r.offset) for r in steady.repairs] == [(str(last), intact)]
    assert [r.payload for r in read_all(open_file_log())] == [
        *payloads("a", 3), *payloads("b", 2), b"c"
    ]


# corruption ------------------------------------------------------------------------------
def assert_corruption_at(excinfo: pytest.ExceptionInfo[LogCorruption], path: Path,
                         offset: int) -> None:
    assert excinfo.value.path == str(path)
    assert excinfo.value.offset == offset
    assert str(offset) in excinfo.value.message


@pytest.mark.parametrize("index", [0, 3, 6])
@pytest.mark.parametrize("where", ["header-length", "header-crc", "payload-crc", "payload"])
def test_damage_before_the_tail_is_loud_for_readers_and_writers(
    open_file_log: Callable[..., FileShardLog], index: int, where: str
) -> None:
    """A damaged frame with intact frames after it raises LogCorruption naming the segment
    and the frame's byte offset, from read and from append; nothing is skipped or cut."""
    log = open_file_log()
    sent = payloads("c", 8)
    log.append(sent)
    log.close()
    segment = log.segments()[-1][1]
    start = frame_offsets(sent)[index]
    flip_byte(segment, start + {"header-length": 2, "header-crc": 13, "payload-crc": 17,
                                "payload": HEADER_SIZE + 1}[where])
    size = segment.stat().st_size

    reader = open_file_log()
    if index:
        assert [r.payload for r in reader.read(0, index)] == sent[:index]
    with pytest.raises(LogCorruption) as excinfo:
        reader.read(index, 100)
    assert_corruption_at(excinfo, segment, start)
    with pytest.raises(LogCorruption) as excinfo:
        read_all(open_file_log())
    assert_corruption_at(excinfo, segment, start)

    writer = open_file_log()
    with pytest.raises(LogCorruption) as excinfo:
        writer.append([b"must not land"])
    assert_corruption_at(excinfo, segment, start)
    assert writer.repairs == []
    assert segment.stat().st_size == size


@pytest.mark.parametrize("damage", ["flip-first", "flip-last", "truncate-last"])
def test_damage_in_a_segment_that_is_not_the_last_is_loud(
    open_file_log: Callable[..., FileShardLog], damage: str
) -> None:
    """Damage in an earlier segment is corruption even at that segment's end (a sealed
    segment has no torn tail): LogCorruption names the segment and frame offset."""
    log = open_file_log(segment_bytes=150)
    sent = payloads("s", 30)
    log.append(sent)
    segments = log.segments()
    assert len(segments) >= 3
    (base, segment), (next_base, _) = segments[1], segments[2]
    held = sent[base:next_base]
    offsets = frame_offsets(held)
    if damage == "flip-first":
        flip_byte(segment, offsets[0] + HEADER_SIZE)
        start, bad_position = offsets[0], base
    elif damage == "flip-last":
        flip_byte(segment, offsets[-1] + 5)
        start, bad_position = offsets[-1], next_base - 1
    else:
        segment.write_bytes(segment.read_bytes()[:-2])
        start, bad_position = offsets[-1], next_base - 1

    reader = open_file_log(segment_bytes=150)
    got = []
    with pytest.raises(LogCorruption) as excinfo:
        position = 0
        while True:
            records = reader.read(position, 1)
            assert records, "the reader stopped instead of raising"
            got.append(records[0].payload)
            position += 1
    assert got == sent[:bad_position]
    assert_corruption_at(excinfo, segment, start)
    # the tail of the log is intact, so writers carry on; readers still stop at the damage
    assert log.append([b"more"])[0].position == 30
    with pytest.raises(LogCorruption):
        read_all(open_file_log(segment_bytes=150))


def test_missing_segment_is_loud(open_file_log: Callable[..., FileShardLog]) -> None:
    """A deleted middle segment is a gap in positions: reading across it raises."""
    log = open_file_log(segment_bytes=150)
    log.append(payloads("g", 30))
    segments = log.segments()
    segments[1][1].unlink()
    with pytest.raises(LogCorruption) as excinfo:
        read_all(open_file_log(segment_bytes=150))
    assert excinfo.value.path == str(segments[2][1])


FRAMES = payloads("h", 12)
FRAME_OFFSETS = frame_offsets(FRAMES)


@settings(max_examples=60, deadline=None)
@given(index=st.integers(0, len(FRAMES) - 2), data=st.data())
def test_any_single_flipped_byte_before_the_last_frame_is_reported_exactly(
    index: int, data: st.DataObject
) -> None:
    """Whatever byte of whichever frame is damaged, if an intact frame follows it then read
    raises LogCorruption at exactly that frame's offset, after returning the ones before."""
    byte = data.draw(st.integers(0, frame_size(FRAMES[index]) - 1), label="byte")
    mask = data.draw(st.integers(1, 255), label="mask")
    with tempfile.TemporaryDirectory() as tmp:
        log = FileShardLog(Path(tmp))
        log.append(FRAMES)
        log.close()
        segment = log.segments()[0][1]
        raw = bytearray(segment.read_bytes())
        raw[FRAME_OFFSETS[index] + byte] ^= mask
        segment.write_bytes(bytes(raw))
        reader = FileShardLog(Path(tmp))
        try:
            assert [r.payload for r in reader.read(0, index)] == FRAMES[:index]
            with pytest.raises(LogCorruption) as excinfo:
                reader.read(index, len(FRAMES))
            assert_corruption_at(excinfo, segment, FRAME_OFFSETS[index])
        finally:
            reader.close()


# several processes -----------------------------------------------------------------------
APPEND_WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from nereus.adapters.shardlog.file import FileShardLog

    directory, worker, appends, segment_bytes = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
    log = FileShardLog(Path(directory), segment_bytes=segment_bytes)
    sys.stdin.readline()  # wait for "go" so every worker appends at once
    receipts = []
    for i in range(appends):
        batch = [f"{worker}-{i}-{j}".encode() for j in range(1 + i % 3)]
        for payload, receipt in zip(batch, log.append(batch)):
            receipts.append([receipt.position, receipt.broker_ms, payload.decode()])
    print(json.dumps({"receipts": receipts, "repairs": len(log.repairs)}))
""")


def start_workers(directory: Path, count: int, appends: int,
                  segment_bytes: int) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPEND_WORKER, str(directory), f"w{n}", str(appends),
             str(segment_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for n in range(count)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


@dataclass(frozen=True)
class WorkerReport:
    receipts: list[tuple[int, int, str]]  # (position, broker_ms, payload) per record
    repairs: int


def finish_workers(procs: list[subprocess.Popen[str]]) -> list[WorkerReport]:
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=WORKER_DEADLINE_S)
        assert proc.returncode == 0, err
        raw = json.loads(out)
        reports.append(WorkerReport([tuple(r) for r in raw["receipts"]], raw["repairs"]))
    return reports


def test_several_processes_appending_at_once_share_one_gapless_sequence(log_dir: Path) -> None:
    """4 processes x 200 appends (with rollovers): every payload lands exactly once, at
    positions 0..N-1, where its writer's receipt said, with non-decreasing broker time."""
    log_dir.mkdir(parents=True)
    reports = finish_workers(start_workers(log_dir, 4, 200, 4096))

    reader = FileShardLog(log_dir)
    records = read_all(reader, batch=500)
    total = 4 * sum(1 + i % 3 for i in range(200))
    assert positions(records) == list(range(total))
    assert len({r.payload for r in records}) == total
    assert [r.broker_ms for r in records] == sorted(r.broker_ms for r in records)
    assert len(reader.segments()) > 1
    reader.close()

    by_position = {r.position: (r.broker_ms, r.payload.decode()) for r in records}
    for report in reports:
        assert report.repairs == 0
        mine = [position for position, _, _ in report.receipts]
        assert mine == sorted(mine)
        for position, broker_ms, payload in report.receipts:
            assert by_position[position] == (broker_ms, payload)
    assert sum(len(report.receipts) for report in reports) == total
    spans = sorted((r.receipts[0][0], r.receipts[-1][0]) for r in reports)
    assert any(a_end > b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans)), (
        "the workers never overlapped, so nothing was tested"
    )


BIG_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from nereus.adapters.shardlog.file import FileShardLog

    log = FileShardLog(Path(sys.argv[1]), segment_bytes=int(sys.argv[2]))
    for i in range(int(sys.argv[3])):
        log.append([f"{i}-{j}-".encode().ljust(4000, b"p") for j in range(40)])
""")


def test_reader_following_a_busy_writer_never_reports_corruption(log_dir: Path) -> None:
    """A reader tailing the log while another process appends large batches sees records
    appear in order and never mistakes a write in progress for damage."""
    log_dir.mkdir(parents=True)
    batches = 60
    proc = subprocess.Popen(
        [sys.executable, "-c", BIG_WORKER, str(log_dir), str(1 << 20), str(batches)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    reader = FileShardLog(log_dir)
    seen: list[LogRecord] = []
    deadline = time.monotonic() + WORKER_DEADLINE_S
    try:
        while len(seen) < batches * 40:
            assert time.monotonic() < deadline, "the reader never saw every record"
            seen += reader.read(len(seen), 97)
            if proc.poll() is not None and proc.returncode != 0:
                break
    finally:
        _, err = proc.communicate(timeout=WORKER_DEADLINE_S)
    assert proc.returncode == 0, err
    assert positions(seen) == list(range(batches * 40))
    assert seen[-1].payload.startswith(f"{batches - 1}-39-".encode())


# time ------------------------------------------------------------------------------------
def test_clock_going_backwards_still_gives_non_decreasing_broker_time(
    open_file_log: Callable[..., FileShardLog],
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
    open_file_log: Callable[..., FileShardLog],
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


def test_end_position_agrees_across_objects_and_processes(log_dir: Path) -> None:
    """end_position read by another object (after another process appended) is the file's
    record count, not a stale cache."""
    log = FileShardLog(log_dir)
    log.append([b"a"])
    assert log.end_position() == 1
    finish_workers(start_workers(log_dir, 1, 10, 1 << 20))
    assert log.end_position() == 1 + sum(1 + i % 3 for i in range(10))


def test_threads_sharing_one_log_object_never_interleave(tmp_path: Path) -> None:
    """Threads appending through one FileShardLog object get distinct, gapless positions.

    flock does not exclude threads sharing a file descriptor; the log must serialise them.
    """
    import threading

    log = FileShardLog(tmp_path / "log", segment_bytes=4096)
    receipts: list[int] = []
    guard = threading.Lock()

    def writer(n: int) -> None:
        for i in range(150):
            got = log.append([f"t{n}-{i}-{'x' * (i % 40)}".encode(), f"t{n}-{i}-b".encode()])
            with guard:
                receipts.extend(r.position for r in got)
            log.end_position()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(receipts) == list(range(4 * 150 * 2))
    records = FileShardLog(tmp_path / "log").read(0, 10_000)
    assert [r.position for r in records] == list(range(4 * 150 * 2))
    assert len({r.payload for r in records}) == len(records)
