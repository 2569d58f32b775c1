"""The end of a file Shard Log, where writers append: finding it, cutting a torn tail.

Appends are synced in chunks of at most ``MAX_UNSYNCED_BYTES``, so a torn tail is never
longer: the next writer truncates it and records a ``TornTailRepair``, while a damaged
frame followed by intact data, or further from the end, raises ``LogCorruption`` naming the
file and byte offset (``raise_unless_torn``). A new segment's name is made durable with a
directory fsync. ``TailWriter`` is used only under the log's append lock. ``observed_end``
is the end as a report reads it: no lock, no write, headers checked throughout and payload
CRCs only where a torn tail can be; anything short of a clean run of frames answers None,
leaving the exact answer to the writers' path.
"""

from __future__ import annotations

import mmap
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nereus.adapters.backends.shardlog.file_segments import SegmentDirectory
from nereus.errors import LogCorruption
from nereus.framing import (
    HEADER,
    HEADER_SIZE,
    MAX_PAYLOAD,
    BadFrame,
    find_next_frame,
    read_frame,
    read_frames,
)

MAX_UNSYNCED_BYTES: Final = 8 << 20


@dataclass(frozen=True, slots=True)
class TornTailRepair:
    """A torn tail that a writer cut off: where, how much, and why it was torn."""

    path: str
    offset: int
    dropped_bytes: int
    problem: str


@dataclass(slots=True)
class Tail:
    """Where the log ends: its last segment, the intact bytes in it, what comes next."""

    base: int  # base position of the last segment
    path: Path
    size: int  # bytes of intact frames in it
    next_position: int
    last_ms: int


def raise_unless_torn(path: Path, offset: int, buf: bytes, pos: int, bad: BadFrame) -> None:
    """Raise LogCorruption unless the damage at ``pos`` of ``buf`` (byte ``offset`` of
    ``path``) can only be a torn tail."""
    remaining = len(buf) - pos
    if remaining > MAX_UNSYNCED_BYTES + 64:
        intact_after: int | None = pos + 1
    else:
        intact_after = find_next_frame(buf, pos)
    if intact_after is not None:
        raise LogCorruption(
            f"damaged record ({bad.problem}) in {path} at byte {offset} with "
            f"{remaining} bytes after it; the log cannot be read past it",
            path=str(path), offset=offset,
            hint="restore the segment from a replica or backup; nothing was skipped",
        )


class TailWriter:
    """Finds the intact end of the log and writes at it; notes the torn tails it cuts in
    ``repairs``."""

    def __init__(self, segments: SegmentDirectory, repairs: list[TornTailRepair]) -> None:
        self._segments = segments
        self._repairs = repairs
        self._tail: Tail | None = None

    def load(self) -> Tail:
        """The intact end of the log, cutting a torn tail if a crashed writer left one.

        Must hold the lock. Reuses the cached tail when the file has not changed, and
        otherwise scans only the frames after the cached point.
        """
        segments = self._segments.segments()
        if not segments:
            path = self._segments.path_of(0)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.close(fd)
            self._segments.fsync()
            segments = [(0, path)]
        base, path = segments[-1]
        cached = self._tail
        if cached is None or cached.base != base:
            if cached is not None and base < cached.base:
                raise LogCorruption(
                    f"segment {cached.path.name} disappeared from {self._segments.directory}",
                    path=str(cached.path), offset=0,
                )
            cached = Tail(base, path, 0, base, 0)
        size = path.stat().st_size
        if size < cached.size:  # cut by someone else: what the cache counted is gone
            cached = Tail(base, path, 0, base, 0)
        if size != cached.size or (cached.base > 0 and cached.last_ms == 0):
            # an empty last segment (a writer died right after rolling) takes its time
            # from the segment before it, or a backwards clock could stamp earlier
            cached = self._scan(cached)
        self._tail = cached
        return cached

    def write(self, tail: Tail, chunk: list[bytes], chunk_bytes: int) -> None:
        """Append the frames of ``chunk`` to the last segment and fdatasync them."""
        if not chunk:
            return
        fd = os.open(tail.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = b"".join(chunk)
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fdatasync(fd)
        finally:
            os.close(fd)
        tail.size += chunk_bytes
        tail.next_position += len(chunk)

    def roll(self, tail: Tail) -> None:
        """Start a new, empty last segment at the tail's next position."""
        tail.base = tail.next_position
        tail.path = self._segments.path_of(tail.base)
        tail.size = 0
        fd = os.open(tail.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        self._segments.fsync()

    def _scan(self, tail: Tail) -> Tail:
        with open(tail.path, "rb") as handle:
            handle.seek(tail.size)
            buf = handle.read()
        pos, last_ms, count = 0, tail.last_ms, 0
        while pos < len(buf):
            frame = read_frame(buf, pos)
            if isinstance(frame, BadFrame):
                self._cut_torn_tail(tail.path, tail.size + pos, buf, pos, frame)
                break
            pos, last_ms, count = frame.end, frame.broker_ms, count + 1
        if tail.last_ms == 0 and count == 0 and tail.base > 0:
            last_ms = self._last_ms_before(tail.base)
        return Tail(tail.base, tail.path, tail.size + pos, tail.next_position + count, last_ms)

    def _last_ms_before(self, base: int) -> int:
        previous = [p for b, p in self._segments.segments() if b < base]
        if not previous:
            return 0
        data = previous[-1].read_bytes()
        pos, last = 0, 0
        while pos < len(data):
            frame = read_frame(data, pos)
            if isinstance(frame, BadFrame):
                break
            pos, last = frame.end, frame.broker_ms
        return last

    def _cut_torn_tail(
        self, path: Path, offset: int, buf: bytes, pos: int, bad: BadFrame
    ) -> None:
        raise_unless_torn(path, offset, buf, pos, bad)
        dropped = len(buf) - pos
        with open(path, "r+b") as handle:
            handle.truncate(offset)
            handle.flush()
            os.fsync(handle.fileno())
        self._repairs.append(TornTailRepair(str(path), offset, dropped, bad.problem))


def observed_end(segments: SegmentDirectory) -> int | None:
    """The log's next position as a reader sees it now, or None when only a writer's
    judgement under the lock can say (module docstring): no segment yet, or anything but
    intact frames up to the end of the last segment."""
    listed = segments.segments()
    if not listed:
        return None
    base, path = listed[-1]
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return base
            with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as data:
                return _count_frames(data, size, base)
    except (OSError, ValueError):  # the segment went away or changed under the reader
        return None


def _count_frames(data: mmap.mmap, size: int, base: int) -> int | None:
    """``base`` + the frames of ``data`` if they run intact to ``size``, else None."""
    unpack, crc32 = HEADER.unpack_from, zlib.crc32
    checked_from = max(0, size - MAX_UNSYNCED_BYTES - HEADER_SIZE)
    pos, count = 0, 0
    while pos < checked_from:  # headers only: their CRC and their length within the file
        if size - pos < HEADER_SIZE:
            return None
        length, _, header_crc, _ = unpack(data, pos)
        end = pos + HEADER_SIZE + length
        if end > size or length > MAX_PAYLOAD or crc32(data[pos:pos + 12]) != header_crc:
            return None
        pos, count = end, count + 1
    rest = data[pos:size]
    run = read_frames(rest, 0, len(rest))  # every check, as a writer makes them
    if run.stopped_by is not None or run.end != len(rest):
        return None
    return base + count + len(run.frames)
