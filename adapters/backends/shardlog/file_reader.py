"""Reading a file Shard Log: a cursor over its segments, kept between reads.

A read continues where the last one stopped (the cursor) unless asked for another position;
then it seeks from the start of the segment holding that position. Damage met while reading
is the end of the log only where it can be a torn tail (the end of the last segment);
anywhere else it raises ``LogCorruption`` naming the file and byte offset, and so does a
segment that does not start where the previous one ended, or one deleted, replaced or
cut while it was being read (its records are gone). Nothing is skipped silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nereus.adapters.backends.shardlog.file_segments import SegmentDirectory
from nereus.adapters.backends.shardlog.file_tail import raise_unless_torn
from nereus.adapters.backends.shardlog.protocol import LogRecord
from nereus.errors import LogCorruption
from nereus.framing import HEADER_SIZE, BadFrame, Frame, read_frame, read_frames

_READ_CHUNK: Final = 4 << 20


@dataclass(slots=True)
class _Cursor:
    base: int
    path: Path
    byte: int
    position: int
    inode: int = 0  # the segment file read so far (0: not opened yet)


class LogReader:
    """Reads one file log's records in position order."""

    def __init__(self, segments: SegmentDirectory) -> None:
        self._segments = segments
        self._cursor: _Cursor | None = None

    def forget(self) -> None:
        """Drop the cursor (its segment may be gone): the next read seeks again."""
        self._cursor = None

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` intact records from ``from_position``, in order."""
        try:
            return self._read(from_position, max_records)
        except FileNotFoundError as exc:  # a segment went under the cursor or the seek
            self._cursor = None
            gone = Path(exc.filename) if exc.filename else None
            raise LogCorruption(
                f"segment {gone.name if gone else '?'} of {self._segments.directory} was "
                f"deleted while it was read: the records from position {from_position} on "
                "that it held are gone", path=str(gone or self._segments.directory), offset=0,
                hint="put the segment back from a backup if there is one; otherwise the "
                "shard must be recovered (`nereus doctor` names the way)") from None

    def _read(self, from_position: int, max_records: int) -> list[LogRecord]:
        cursor = self._cursor
        if cursor is None or cursor.position != from_position:
            cursor = self._seek(from_position)
            if cursor is None:
                return []
        out: list[LogRecord] = []
        segments = self._segments.segments()
        while len(out) < max_records:
            got = self._read_segment(cursor, max_records - len(out), segments, out)
            if got:
                continue
            following = [(b, p) for b, p in segments if b > cursor.base]
            if not following or cursor.byte < cursor.path.stat().st_size:
                break
            base, path = following[0]
            if base != cursor.position:
                raise LogCorruption(
                    f"segment {path.name} starts at position {base} but {cursor.path.name} "
                    f"ends at {cursor.position}: records are missing",
                    path=str(path), offset=0,
                )
            cursor.base, cursor.path, cursor.byte, cursor.inode = base, path, 0, 0
        self._cursor = cursor
        return out

    def _read_segment(
        self, cursor: _Cursor, limit: int, segments: list[tuple[int, Path]], out: list[LogRecord]
    ) -> int:
        """Read up to ``limit`` records of the cursor's segment into ``out``."""
        got, need = 0, 0
        with open(cursor.path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            if (cursor.inode and stat.st_ino != cursor.inode) or size < cursor.byte:
                self._cursor = None
                raise LogCorruption(
                    f"segment {cursor.path.name} of {self._segments.directory} was replaced or "
                    f"cut while it was read (it ends at byte {size}, {cursor.byte} were read): "
                    f"the records from position {cursor.position} on that it held are gone",
                    path=str(cursor.path), offset=cursor.byte,
                    hint="put the segment back from a backup if there is one; otherwise the "
                    "shard must be recovered (`nereus doctor` names the way)")
            cursor.inode = stat.st_ino
            while got < limit and cursor.byte < size:
                handle.seek(cursor.byte)
                buf = handle.read(min(max(_READ_CHUNK, need), size - cursor.byte))
                run = read_frames(buf, 0, limit - got)
                out.extend([
                    LogRecord(position, broker_ms, payload)
                    for position, (broker_ms, payload) in enumerate(run.frames, cursor.position)
                ])
                cursor.position += len(run.frames)
                cursor.byte += run.end
                got += len(run.frames)
                pos, frame = run.end, run.stopped_by
                if frame is None or got >= limit or pos == len(buf):
                    continue
                more_in_file = cursor.byte + (len(buf) - pos) < size
                if more_in_file and frame.problem in ("SHORT_HEADER", "PAST_END"):
                    # the frame straddles the end of this chunk: read again from it
                    need = HEADER_SIZE
                    if len(buf) - pos >= HEADER_SIZE:
                        need += int.from_bytes(buf[pos:pos + 4], "big")
                    continue
                self._damage(cursor, segments, frame)
                break
        return got

    @staticmethod
    def _damage(cursor: _Cursor, segments: list[tuple[int, Path]], bad: BadFrame) -> None:
        """A damaged frame while reading: the end of the log if torn, else raise."""
        offset = cursor.byte
        if segments and cursor.base != segments[-1][0]:
            raise LogCorruption(
                f"damaged record ({bad.problem}) in {cursor.path} at byte {offset}, in a "
                "segment that is not the last; the log cannot be read past it",
                path=str(cursor.path), offset=offset,
            )
        with open(cursor.path, "rb") as handle:
            handle.seek(offset)
            rest = handle.read()
        again = read_frame(rest, 0)
        if isinstance(again, Frame):
            return  # a frame appended while we read it: not damage, the next read gets it
        raise_unless_torn(cursor.path, offset, rest, 0, again)

    def _seek(self, position: int) -> _Cursor | None:
        segments = self._segments.segments()
        candidates = [(b, p) for b, p in segments if b <= position]
        if not candidates:
            if segments:
                raise LogCorruption(
                    f"position {position} is before the first retained segment "
                    f"({segments[0][1].name})",
                    path=str(segments[0][1]), offset=0,
                )
            return None
        base, path = candidates[-1]
        cursor = _Cursor(base, path, 0, base)
        if position > base:
            skipped: list[LogRecord] = []
            while cursor.position < position:
                got = self._read_segment(cursor, position - cursor.position, segments, skipped)
                skipped.clear()
                if not got:
                    return None if cursor.position < position else cursor
        return cursor
