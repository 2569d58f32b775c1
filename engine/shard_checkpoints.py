"""When a shard loop takes a checkpoint: every N records, every T seconds, or on request.

The snapshot is taken on the loop's own thread between two applied batches (RocksDB hard
links: fast) and handed to the engine's ``Checkpointer``, which hashes, uploads and
catalogues it on its thread; a request (``nereus checkpoint create``) gets the result
through a Future. CHECKPOINT_MARK records are not changes (else a checkpoint would always
be due again). Intervals are read from the engine's Clock.
"""

from __future__ import annotations

import queue
import threading
import uuid
from concurrent.futures import Future
from pathlib import Path

from nereus.adapters.checkpoint_take import Taken, new_checkpoint_id, snapshot
from nereus.adapters.shardlog.protocol import ShardLog
from nereus.engine.checkpointer import Checkpointer, Job
from nereus.engine.clock import TrustedClock
from nereus.shard import ShardId
from nereus.state.store import ShardStore


class CheckpointTrigger:
    """One shard's checkpoint requests and the changes since its last checkpoint."""

    def __init__(self, shard: ShardId, store: ShardStore, log: ShardLog, *,
                 checkpointer: Checkpointer | None, staging: Path | None,
                 clock: TrustedClock, owner_id: str, wake: threading.Event) -> None:
        self._shard = shard
        self._store = store
        self._log = log
        self._checkpointer = checkpointer
        self._staging = staging
        self._clock = clock
        self._time = clock.source
        self._owner_id = owner_id
        self._wake = wake
        self._requests: queue.SimpleQueue[Future[Taken]] = queue.SimpleQueue()
        self.changed = 0  # records applied since the last checkpoint, CHECKPOINT_MARK aside
        self._last_mono = self._time.monotonic()

    def request(self) -> Future[Taken]:
        """A checkpoint taken between two batches; the Future resolves once catalogued."""
        future: Future[Taken] = Future()
        if self._checkpointer is None or self._staging is None:
            future.set_exception(RuntimeError("this engine has no object store for checkpoints"))
            return future
        self._requests.put(future)
        self._wake.set()
        return future

    def maybe_take(self, applied_position: int | None, epoch: int) -> None:
        """Snapshot now if asked to or if one is due, and hand it to the checkpointer."""
        if self._checkpointer is None or self._staging is None:
            return
        requests = self._take_requests()
        settings = self._checkpointer.settings
        changed = self.changed
        due = changed > 0 and (
            (settings.every_records and changed >= settings.every_records)
            or (settings.every_seconds
                and self._time.monotonic() - self._last_mono >= settings.every_seconds)
        )
        if not requests and not due:
            return
        checkpoint_id = new_checkpoint_id(applied_position, uuid.uuid4().hex[:8])
        try:
            directory = snapshot(self._store, self._staging, checkpoint_id)
        except Exception as exc:
            for future in requests:
                future.set_exception(exc)
            raise
        self._checkpointer.submit(Job(self._shard, directory, checkpoint_id, self._log,
                                      self._clock.wall_ms(), self._owner_id, epoch, requests))
        self.changed = 0
        self._last_mono = self._time.monotonic()

    def refuse_pending(self) -> None:
        """Fail every request still waiting: the loop has stopped."""
        for future in self._take_requests():
            future.set_exception(RuntimeError("the engine is stopping"))

    def _take_requests(self) -> list[Future[Taken]]:
        requests: list[Future[Taken]] = []
        while True:
            try:
                requests.append(self._requests.get_nowait())
            except queue.Empty:
                return requests
