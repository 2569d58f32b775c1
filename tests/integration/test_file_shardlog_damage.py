"""The file Shard Log when bytes go bad: a crashed writer leaves a torn tail that readers
never see and the next writer cuts; damage anywhere else is loud (``LogCorruption`` naming
file and byte, never a skip).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.file_tail import TornTailRepair
from nereus.errors import LogCorruption
from nereus.framing import HEADER_SIZE, encode_frame
from tests.integration.file_segments import (
    OpenFileLog,
    assert_corruption_at,
    flip_byte,
    frame_offsets,
    frame_size,
    log_path_for,
    positions,
)
from tests.integration.shardlog_contract import payloads, read_all

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
    open_file_log: OpenFileLog, tail: bytes, segment_bytes: int
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
    open_file_log: OpenFileLog,
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
    open_file_log: OpenFileLog,
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
@pytest.mark.parametrize("index", [0, 3, 6])
@pytest.mark.parametrize("where", ["header-length", "header-crc", "payload-crc", "payload"])
def test_damage_before_the_tail_is_loud_for_readers_and_writers(
    open_file_log: OpenFileLog, index: int, where: str
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
    open_file_log: OpenFileLog, damage: str
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


def test_missing_segment_is_loud(open_file_log: OpenFileLog) -> None:
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
