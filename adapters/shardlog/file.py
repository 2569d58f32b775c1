"""The embedded default Shard Log: segmented, CRC-framed, fsynced append-only files.

Layout: ``<root>/<route>/<partition>/<base position, 20 digits>.seg`` plus a ``.lock``
file. Positions are record numbers from 0, like Kafka offsets; a segment is named by the
position of its first record and rolls over at ``segment_bytes``.

* **Durable receipts.** ``append`` writes the frames and fdatasyncs before returning;
  a receipt is never handed out for bytes that are not on disk.
* **Several writers.** The CLI and the engine append to the same partition: every
  append holds an exclusive ``flock`` on ``.lock`` and re-reads the tail, so positions
  are assigned from the file itself, never from a stale cache. Threads sharing one log
  object (the shard loop and admin-socket requests) are serialised by a mutex first,
  because ``flock`` does not exclude threads that share a file descriptor.
* **Torn tail.** A crash mid-append can leave a partial or damaged frame at the end of
  the last segment. It was never receipted, so the next writer truncates it and records
  a ``TornTailRepair``; readers treat it as the end of the log.
* **Corruption is loud.** A damaged frame followed by intact data, or anywhere but the
  tail of the last segment, raises ``LogCorruption`` naming the file and byte offset.
  Nothing is ever skipped silently.

Appends are written and synced in chunks of at most ``MAX_UNSYNCED_BYTES``, so a torn
tail can never be longer than that; damage further from the end is corruption by
definition.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nereus.adapters.shardlog.protocol import LogRecord, Receipt
from nereus.errors import LogCorruption
from nereus.framing import (
    HEADER_SIZE,
    BadFrame,
    Frame,
    encode_frame,
    find_next_frame,
    read_frame,
    read_frames,
)

MAX_UNSYNCED_BYTES: Final = 8 << 20
DEFAULT_SEGMENT_BYTES: Final = 64 << 20
_SUFFIX: Final = ".seg"
_READ_CHUNK: Final = 4 << 20


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TornTailRepair:
    """A torn tail that a writer cut off: where, how much, and why it was torn."""

    path: str
    offset: int
    dropped_bytes: int
    problem: str


@dataclass(slots=True)
class _Tail:
    base: int  # base position of the last segment
    path: Path
    size: int  # bytes of intact frames in it
    next_position: int
    last_ms: int


@dataclass(slots=True)
class _Cursor:
    base: int
    path: Path
    byte: int
    position: int


class FileShardLog:
    """One shard's file log (one directory)."""

    dense = True  # positions are record numbers 0, 1, 2, ...

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        create: bool = True,
    ) -> None:
        self.directory = Path(directory)
        self.description = f"the file log {self.directory}"
        if create:
            self.directory.mkdir(parents=True, exist_ok=True)
        elif not self.directory.is_dir():
            from nereus.errors import NotFound

            raise NotFound(f"no shard log at {self.directory}")
        self.segment_bytes = segment_bytes
        self._clock_ms = clock_ms
        self._lock_fd: int | None = None
        self._tail: _Tail | None = None
        self._cursor: _Cursor | None = None
        self.repairs: list[TornTailRepair] = []
        self._mutex = threading.Lock()
        self._segments_cache: tuple[int, tuple[tuple[int, Path], ...]] | None = None
        self._read_mutex = threading.Lock()
        # called with the log's end under the append lock before every append; raises to
        # refuse it (``engine.continuity.guard_file_log``: never append at a position the
        # shard's state already applied another record at)
        self.check_end: Callable[[int], None] | None = None

    # segments ---------------------------------------------------------------------------
    def segments(self) -> list[tuple[int, Path]]:
        """(base position, path) of every segment, in position order.

        Cached by the directory's modification time: creating or deleting a segment
        changes it, appending to one does not, so an idle poll costs one ``stat``. The
        cache is trusted only once that time is two seconds old, because file-system
        timestamps are coarse: two changes within one tick can share a stamp.
        """
        stamp = os.stat(self.directory).st_mtime_ns
        cached = self._segments_cache
        if cached is not None and cached[0] == stamp and time.time_ns() - stamp > 2_000_000_000:
            return list(cached[1])
        found = []
        for entry in os.scandir(self.directory):
            name = entry.name
            if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
                found.append((int(name[: -len(_SUFFIX)]), Path(entry.path)))
        found.sort()
        self._segments_cache = (stamp, tuple(found))
        return found

    def _segment_path(self, base: int) -> Path:
        return self.directory / f"{base:020d}{_SUFFIX}"

    # writing ----------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        # flock excludes other processes (and other log objects); it does not exclude other
        # threads sharing this object's file descriptor, hence the mutex in front of it
        with self._mutex:
            if self._lock_fd is None:
                self._lock_fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Append ``payloads`` durably, in order; returns one receipt each."""
        if not payloads:
            return []
        with self._locked():
            tail = self._load_tail()
            if self.check_end is not None:
                self.check_end(tail.next_position)
            broker_ms = max(self._clock_ms(), tail.last_ms)
            first = tail.next_position
            receipts: list[Receipt] = []
            chunk: list[bytes] = []
            chunk_bytes = 0
            for payload in payloads:
                frame = encode_frame(broker_ms, payload)
                if tail.size + chunk_bytes + len(frame) > self.segment_bytes and (
                    tail.size + chunk_bytes > 0
                ):
                    self._write(tail, chunk, chunk_bytes)
                    chunk, chunk_bytes = [], 0
                    self._roll(tail)
                elif chunk_bytes + len(frame) > MAX_UNSYNCED_BYTES and chunk:
                    self._write(tail, chunk, chunk_bytes)
                    chunk, chunk_bytes = [], 0
                chunk.append(frame)
                chunk_bytes += len(frame)
                receipts.append(Receipt(first + len(receipts), broker_ms))
            self._write(tail, chunk, chunk_bytes)
            tail.last_ms = broker_ms
            return receipts

    def _write(self, tail: _Tail, chunk: list[bytes], chunk_bytes: int) -> None:
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

    def _roll(self, tail: _Tail) -> None:
        tail.base = tail.next_position
        tail.path = self._segment_path(tail.base)
        tail.size = 0
        fd = os.open(tail.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        self._fsync_dir()

    def _fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _load_tail(self) -> _Tail:
        """The intact end of the log, cutting a torn tail if a crashed writer left one.

        Must hold the lock. Reuses the cached tail when the file has not changed, and
        otherwise scans only the frames after the cached point.
        """
        segments = self.segments()
        if not segments:
            path = self._segment_path(0)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.close(fd)
            self._fsync_dir()
            segments = [(0, path)]
        base, path = segments[-1]
        cached = self._tail
        if cached is None or cached.base != base:
            if cached is not None and base < cached.base:
                raise LogCorruption(
                    f"segment {cached.path.name} disappeared from {self.directory}",
                    path=str(cached.path), offset=0,
                )
            cached = _Tail(base, path, 0, base, 0)
        size = path.stat().st_size
        if size < cached.size:  # cut by someone else: what the cache counted is gone
            cached = _Tail(base, path, 0, base, 0)
        if size != cached.size or (cached.base > 0 and cached.last_ms == 0):
            # an empty last segment (a writer died right after rolling) takes its time
            # from the segment before it, or a backwards clock could stamp earlier
            cached = self._scan_tail(cached, size)
        self._tail = cached
        return cached

    def _scan_tail(self, tail: _Tail, size: int) -> _Tail:
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
        return _Tail(tail.base, tail.path, tail.size + pos, tail.next_position + count, last_ms)

    def _last_ms_before(self, base: int) -> int:
        previous = [p for b, p in self.segments() if b < base]
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
        self._raise_unless_torn(path, offset, buf, pos, bad)
        dropped = len(buf) - pos
        with open(path, "r+b") as handle:
            handle.truncate(offset)
            handle.flush()
            os.fsync(handle.fileno())
        self.repairs.append(TornTailRepair(str(path), offset, dropped, bad.problem))

    @staticmethod
    def _raise_unless_torn(path: Path, offset: int, buf: bytes, pos: int, bad: BadFrame) -> None:
        """Raise LogCorruption unless the damage at ``pos`` can only be a torn tail."""
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

    # reading ----------------------------------------------------------------------------
    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` intact records from ``from_position``, in order."""
        with self._read_mutex:
            return self._read(from_position, max_records)

    def _read(self, from_position: int, max_records: int) -> list[LogRecord]:
        cursor = self._cursor
        if cursor is None or cursor.position != from_position:
            cursor = self._seek(from_position)
            if cursor is None:
                return []
        out: list[LogRecord] = []
        segments = self.segments()
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
            cursor.base, cursor.path, cursor.byte = base, path, 0
        self._cursor = cursor
        return out

    def _read_segment(
        self, cursor: _Cursor, limit: int, segments: list[tuple[int, Path]], out: list[LogRecord]
    ) -> int:
        """Read up to ``limit`` records of the cursor's segment into ``out``."""
        got, need = 0, 0
        with open(cursor.path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
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

    def _damage(self, cursor: _Cursor, segments: list[tuple[int, Path]], bad: BadFrame) -> None:
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
        self._raise_unless_torn(cursor.path, offset, rest, 0, again)

    def _seek(self, position: int) -> _Cursor | None:
        segments = self.segments()
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

    def start_position(self) -> int:
        """The first retained position (0 until retention deleted a segment)."""
        segments = self.segments()
        return segments[0][0] if segments else 0

    def delete_before(self, position: int) -> list[str]:
        """Delete whole segments whose records are all before ``position``.

        The caller checks the Recovery Floor first (``engine.checkpoints.check_floor``);
        the last segment is never deleted. Returns the deleted files.
        """
        deleted: list[str] = []
        with self._locked():
            segments = self.segments()
            for (_, path), (next_base, _) in itertools.pairwise(segments):
                if next_base > position:
                    break
                path.unlink()
                deleted.append(str(path))
            if deleted:
                self._fsync_dir()
                self._cursor = None
        return deleted

    def end_position(self) -> int:
        with self._locked():
            return self._load_tail().next_position

    def ack(self, position: int) -> None:
        """The file log keeps no consumer offsets; RocksDB's applied position is the truth."""

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
