"""The embedded default Shard Log: segmented, CRC-framed, fsynced append-only files.

``<root>/<route>/<partition>/<base position, 20 digits>.seg`` plus a ``.lock`` file;
positions are record numbers from 0. ``append`` fdatasyncs before returning: a receipt is
never handed out for bytes not on disk. Every append holds an exclusive ``flock`` on
``.lock`` and re-reads the tail, so positions come from the file, whatever process writes;
threads sharing one log object are serialised by a mutex first (``flock`` does not exclude
them). A torn tail (at most ``MAX_UNSYNCED_BYTES``, the sync chunk) is cut by the next
writer and reported (``file_tail``); damage anywhere else raises ``LogCorruption`` naming
file and offset. Nothing is ever skipped silently.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from nereus.adapters.backends.shardlog.file_reader import LogReader
from nereus.adapters.backends.shardlog.file_segments import SegmentDirectory
from nereus.adapters.backends.shardlog.file_tail import (
    MAX_UNSYNCED_BYTES,
    TailWriter,
    TornTailRepair,
    observed_end,
)
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.framing import encode_frame

DEFAULT_SEGMENT_BYTES: Final = 64 << 20


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


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
        self.repairs: list[TornTailRepair] = []
        self._mutex = threading.Lock()
        self._segments = SegmentDirectory(self.directory)
        self._tail = TailWriter(self._segments, self.repairs)
        self._reader = LogReader(self._segments)
        self._read_mutex = threading.Lock()
        # called with the log's end under the append lock before every append; raises to
        # refuse it (``engine.continuity.guard_file_log``: never append at a position the
        # shard's state already applied another record at)
        self.check_end: Callable[[int], None] | None = None

    def segments(self) -> list[tuple[int, Path]]:
        """(base position, path) of every segment, in position order."""
        return self._segments.segments()

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
            tail = self._tail.load()
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
                    self._tail.write(tail, chunk, chunk_bytes)
                    chunk, chunk_bytes = [], 0
                    self._tail.roll(tail)
                elif chunk_bytes + len(frame) > MAX_UNSYNCED_BYTES and chunk:
                    self._tail.write(tail, chunk, chunk_bytes)
                    chunk, chunk_bytes = [], 0
                chunk.append(frame)
                chunk_bytes += len(frame)
                receipts.append(Receipt(first + len(receipts), broker_ms))
            self._tail.write(tail, chunk, chunk_bytes)
            tail.last_ms = broker_ms
            return receipts

    # reading ----------------------------------------------------------------------------
    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` intact records from ``from_position``, in order."""
        with self._read_mutex:
            return self._reader.read(from_position, max_records)

    def start_position(self) -> int:
        """The first retained position (0 until retention deleted a segment)."""
        segments = self.segments()
        return segments[0][0] if segments else 0

    def delete_before(self, position: int) -> list[str]:
        """Delete whole segments whose records are all before ``position``.

        The caller checks the Recovery Floor first (``adapters.checkpoint_catalog.check_floor``);
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
                self._segments.fsync()
                self._reader.forget()
        return deleted

    def end_position(self) -> int:
        with self._locked():
            return self._tail.load().next_position

    def observed_end_position(self) -> int:
        """``end_position`` as a report reads it (``shard inspect``, ``shard list``): without
        the append lock or a write, in bounded work (``file_tail.observed_end``); where
        that cannot answer (a torn or damaged frame, a segment changing under it, no
        segment yet), ``end_position`` does, as it always did."""
        observed = observed_end(self._segments)
        return self.end_position() if observed is None else observed

    def ack(self, position: int) -> None:
        """The file log keeps no consumer offsets; RocksDB's applied position is the truth."""

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
