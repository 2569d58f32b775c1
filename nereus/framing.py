"""Log record framing for the file Shard Log: CRC-checked frames in segment files.

One frame (big-endian; ``docs/wire.md`` §1)::

    offset 0   u32  payload length        offset 12  u32  CRC-32 of bytes 0..12
    offset 4   u64  append time, epoch ms offset 16  u32  CRC-32 of the payload
    offset 20  payload: one encoded record (``nereus.records.codec``)

The header has its own CRC, so a damaged length is caught before it is trusted. An intact
header whose bytes run past the file's end is a torn write; a failed CRC is damage; damage
is a torn tail (safe to cut: never acknowledged) or corruption (stop, name the offset)
depending on whether an intact frame follows (``find_next_frame``). ``read_frames`` checks
consecutive frames without building a ``Frame`` each, since the log reader touches every
record.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Final

HEADER: Final = struct.Struct(">IQI I".replace(" ", ""))
HEADER_SIZE: Final = 20
_PREFIX: Final = struct.Struct(">IQ")
MAX_PAYLOAD: Final = 64 << 20


def encode_frame(broker_ms: int, payload: bytes) -> bytes:
    prefix = _PREFIX.pack(len(payload), broker_ms)
    return prefix + struct.pack(">II", zlib.crc32(prefix), zlib.crc32(payload)) + payload


@dataclass(frozen=True, slots=True)
class Frame:
    start: int  # byte offset of the frame in its buffer
    end: int  # byte offset just past it
    broker_ms: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class BadFrame:
    """Why the bytes at ``start`` are not a frame."""

    start: int
    problem: str  # SHORT_HEADER, PAST_END, HEADER_CRC, PAYLOAD_CRC, TOO_LARGE


@dataclass(frozen=True, slots=True)
class FrameRun:
    """Consecutive intact frames read from a buffer, and what stopped the run."""

    frames: list[tuple[int, bytes]]  # (broker_ms, payload) of each frame, in order
    end: int  # byte offset just past the last intact frame
    stopped_by: BadFrame | None  # None when the limit was reached or the buffer ended


def _check(buf: bytes | memoryview, start: int) -> tuple[int, int, bytes] | str:
    """(end, broker_ms, payload) of the intact frame at ``start``, or what is wrong."""
    if len(buf) - start < HEADER_SIZE:
        return "SHORT_HEADER"
    length, broker_ms, header_crc, payload_crc = HEADER.unpack_from(buf, start)
    if zlib.crc32(buf[start:start + 12]) != header_crc:
        return "HEADER_CRC"
    if length > MAX_PAYLOAD:
        return "TOO_LARGE"
    end = start + HEADER_SIZE + length
    if end > len(buf):
        return "PAST_END"
    payload = bytes(buf[start + HEADER_SIZE:end])
    if zlib.crc32(payload) != payload_crc:
        return "PAYLOAD_CRC"
    return end, broker_ms, payload


def read_frame(buf: bytes | memoryview, start: int) -> Frame | BadFrame:
    """The frame at ``start`` of ``buf`` (which ends where the file ends)."""
    checked = _check(buf, start)
    if isinstance(checked, str):
        return BadFrame(start, checked)
    end, broker_ms, payload = checked
    return Frame(start, end, broker_ms, payload)


def read_frames(buf: bytes | memoryview, start: int, limit: int) -> FrameRun:
    """Up to ``limit`` consecutive intact frames from ``start`` (the checks of read_frame).

    The checks of ``_check`` are spelled out here for intact frames: the log reader runs
    this for every record, and a call plus a result tuple per frame were a third of its
    cost. The first frame that fails a check goes through ``_check``, which names it.
    """
    frames: list[tuple[int, bytes]] = []
    append, unpack, crc32 = frames.append, HEADER.unpack_from, zlib.crc32
    pos, size, count = start, len(buf), 0
    while count < limit and pos < size:
        if size - pos >= HEADER_SIZE:
            length, broker_ms, header_crc, payload_crc = unpack(buf, pos)
            end = pos + HEADER_SIZE + length
            if end <= size and length <= MAX_PAYLOAD and crc32(buf[pos:pos + 12]) == header_crc:
                payload = bytes(buf[pos + HEADER_SIZE:end])
                if crc32(payload) == payload_crc:
                    append((broker_ms, payload))
                    pos, count = end, count + 1
                    continue
        problem = _check(buf, pos)
        assert isinstance(problem, str)  # a check above failed, so _check names it
        return FrameRun(frames, pos, BadFrame(pos, problem))
    return FrameRun(frames, pos, None)


def find_next_frame(buf: bytes | memoryview, after: int) -> int | None:
    """Offset of the first intact frame starting after ``after``, if any.

    Used only when a damaged frame is found, to tell corruption (intact data follows)
    from a torn tail (nothing intact follows). A header CRC makes false positives
    vanishingly rare.
    """
    for start in range(after + 1, len(buf) - HEADER_SIZE + 1):
        if isinstance(read_frame(buf, start), Frame):
            return start
    return None
