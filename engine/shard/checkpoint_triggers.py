"""When a shard loop takes a checkpoint: every N records, every T seconds, or on request.

A due checkpoint also waits until the process's due checkpoints took at most
``[checkpoints] max_share`` of the time (``checkpoint_pacing.Pacing``, one per process). The
snapshot is taken on the loop's thread between two applied batches (RocksDB hard links) and
handed to the ``Checkpointer`` to hash, upload and catalogue; a request gets its result
through a Future. CHECKPOINT_MARK records are not changes (else one would always be due).
RocksDB's checkpoint flushes the memtable holding the GIL, so with more than
``PRE_FLUSH_BYTES`` unflushed the loop first asks RocksDB to flush on its own thread
(``ShardStore.start_flush``) and snapshots a later turn, once that flush ended (or after
``PRE_FLUSH_WAIT_S``). Figures: ``docs/decisions/0012-checkpoints-off-the-loops.md``.
"""

from __future__ import annotations

import queue
import threading
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Final, TypeVar

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.offline.checkpoint_take import Taken, new_checkpoint_id, snapshot
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.engine.shard.checkpointer import Checkpointer, Job
from nereus.features import BASE_LEVEL
from nereus.shard import ShardId
from nereus.state.store import ShardStore

T = TypeVar("T")

# this much unflushed is flushed before the snapshot, off the GIL (module docstring); less
# the checkpoint flushes itself in a few ms
PRE_FLUSH_BYTES: Final = 1 << 20
PRE_FLUSH_WAIT_S: Final = 10.0  # then the snapshot is taken with whatever is left to flush


class CheckpointTrigger:
    """One shard's checkpoint requests and the changes since its last checkpoint."""

    def __init__(self, shard: ShardId, store: ShardStore, log: ShardLog, *,
                 checkpointer: Checkpointer | None, staging: Path | None,
                 clock: TrustedClock, owner_id: str, wake: threading.Event,
                 feature_level: int = BASE_LEVEL) -> None:
        self._shard = shard
        self._store = store
        self._log = log
        self._checkpointer = checkpointer
        self._staging = staging
        self._clock = clock
        self._time = clock.source
        self._owner_id = owner_id
        self._wake = wake
        self._feature_level = feature_level  # read as the loop was built (incremental: 2)
        self._requests: queue.SimpleQueue[Future[Taken]] = queue.SimpleQueue()
        # requesters who wait only for the snapshot (a planned release), not the upload
        self._snapshot_requests: queue.SimpleQueue[Future[str]] = queue.SimpleQueue()
        self.changed = 0  # records applied since the last checkpoint, CHECKPOINT_MARK aside
        self._last_mono = self._time.monotonic()
        self._flush_began: float | None = None  # the pre-flush the next snapshot waits for

    @property
    def flushing(self) -> bool:
        """A checkpoint waits for its memtable's flush: the loop should look again soon."""
        return self._flush_began is not None

    def request(self) -> Future[Taken]:
        """A checkpoint taken between two batches; the Future resolves once catalogued."""
        future: Future[Taken] = Future()
        if self._checkpointer is None or self._staging is None:
            future.set_exception(RuntimeError("this engine has no object store for checkpoints"))
            return future
        self._requests.put(future)
        self._wake.set()
        return future

    def request_snapshot(self) -> Future[str]:
        """A checkpoint taken between two batches; the Future resolves with its id as soon
        as the snapshot is handed to the checkpointer (which uploads and catalogues it on
        its own thread): a planned release lets go without waiting for the upload."""
        future: Future[str] = Future()
        if self._checkpointer is None or self._staging is None:
            future.set_exception(RuntimeError("this engine has no object store for checkpoints"))
            return future
        self._snapshot_requests.put(future)
        self._wake.set()
        return future

    def maybe_take(self, applied_position: int | None, epoch: int) -> None:
        """Snapshot now if asked to or if one is due, and hand it to the checkpointer."""
        if self._checkpointer is None or self._staging is None:
            return
        settings = self._checkpointer.settings
        # the process's due checkpoints are paced together: the next due one waits until
        # the last is uploaded and its pause is over (a backlog filled fast would otherwise
        # queue a full upload per every_records and shard, each larger than the last)
        pacing = self._checkpointer.pacing
        changed = self.changed
        due = changed > 0 and pacing.ready() and (
            (settings.every_records and changed >= settings.every_records)
            or (settings.every_seconds
                and self._time.monotonic() - self._last_mono >= settings.every_seconds)
        )
        asked = not self._requests.empty() or not self._snapshot_requests.empty()
        if not (asked or due):
            self._flush_began = None  # what the flush was for is gone (refused): rest again
            return
        if not self._memtable_flushed():
            return
        requests = self._take_requests()
        snapshots = _drain(self._snapshot_requests)
        due = due and pacing.claim()  # another loop of the process may have claimed it
        if not requests and not snapshots and not due:
            return
        checkpoint_id = new_checkpoint_id(applied_position, uuid.uuid4().hex[:8])
        try:
            directory = snapshot(self._store, self._staging, checkpoint_id)
        except Exception as exc:
            if due:
                pacing.ended()
            for future in requests:
                future.set_exception(exc)
            for snapshotted in snapshots:
                snapshotted.set_exception(exc)
            raise
        if due:
            uploading: Future[Taken] = Future()
            uploading.add_done_callback(pacing.ended)
            requests = [*requests, uploading]
        self._checkpointer.submit(Job(self._shard, directory, checkpoint_id, self._log,
                                      self._clock.wall_ms(), self._owner_id, epoch, requests,
                                      self._feature_level))
        for snapshotted in snapshots:
            snapshotted.set_result(checkpoint_id)
        self.changed = 0
        self._last_mono = self._time.monotonic()

    def _memtable_flushed(self) -> bool:
        """Whether the snapshot may be taken now without a long flush under the GIL: the
        memtable is small, or the flush asked for on an earlier turn has ended (or waited
        ``PRE_FLUSH_WAIT_S``); else the flush is asked for now (module docstring)."""
        if self._flush_began is None:
            if self._store.wal_bytes() <= PRE_FLUSH_BYTES:
                return True
            self._store.start_flush()
            self._flush_began = self._time.monotonic()
            return False
        if self._store.flush_running() and \
                self._time.monotonic() - self._flush_began < PRE_FLUSH_WAIT_S:
            return False
        self._flush_began = None
        return True

    def refuse_pending(self) -> None:
        """Fail every request still waiting: the loop has stopped."""
        stopping = RuntimeError("the engine is stopping")
        for future in self._take_requests():
            future.set_exception(stopping)
        for snapshotted in _drain(self._snapshot_requests):
            snapshotted.set_exception(stopping)

    def _take_requests(self) -> list[Future[Taken]]:
        return _drain(self._requests)


def _drain(requests: queue.SimpleQueue[Future[T]]) -> list[Future[T]]:
    """Every request waiting in ``requests`` now."""
    found: list[Future[T]] = []
    while True:
        try:
            found.append(requests.get_nowait())
        except queue.Empty:
            return found
