"""Log record framing for the file Shard Log: CRC-checked frames in segment files.

One frame::

    offset 0   u32  payload length (big-endian)
    offset 4   u64  broker persistence time, epoch ms (the log's append time)
    offset 12  u32  CRC-32 of bytes 0..12 (the header)
    offset 16  u32  CRC-32 of the payload
    offset 20  payload (one encoded record, see nereus.records.codec)

The header has its own CRC so a damaged length is detected before it is trusted: a
frame whose header is intact but whose bytes run past the end of the file is a torn
write; a frame whose header or payload CRC fails is damaged. Whether damage is a torn
tail (safe to cut: it was never acknowledged) or corruption (stop and name the offset)
depends on whether any intact frame follows it, which ``find_next_frame`` answers.
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


def read_frame(buf: bytes | memoryview, start: int) -> Frame | BadFrame:
    """The frame at ``start`` of ``buf`` (which ends where the file ends)."""
    size = len(buf)
    if size - start < HEADER_SIZE:
        return BadFrame(start, "SHORT_HEADER")
    length, broker_ms, header_crc, payload_crc = HEADER.unpack_from(buf, start)
    if zlib.crc32(buf[start:start + 12]) != header_crc:
        return BadFrame(start, "HEADER_CRC")
    if length > MAX_PAYLOAD:
        return BadFrame(start, "TOO_LARGE")
    end = start + HEADER_SIZE + length
    if end > size:
        return BadFrame(start, "PAST_END")
    payload = bytes(buf[start + HEADER_SIZE:end])
    if zlib.crc32(payload) != payload_crc:
        return BadFrame(start, "PAYLOAD_CRC")
    return Frame(start, end, broker_ms, payload)


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
