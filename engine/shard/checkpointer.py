"""The engine's checkpointer: one thread that turns shard snapshots into catalogued
checkpoints, so hashing and uploading never stall a shard loop.

A shard loop takes the RocksDB snapshot between two applied batches (fast, hard links)
and hands the directory over. Here: manifest (file hashes, recomputed digest; from feature
level 2 the files the newest catalogued checkpoint holds are borrowed, not uploaded), upload
(files, manifest, catalog entry last), a CHECKPOINT_MARK in the shard's log, and, when
``prune_log`` is on, deletion of log segments wholly below the new Recovery Floor.
Requests from ``nereus checkpoint create`` get the result through a Future. A released
shard's log is handed over too (``close_when_done``) and closed after its last job: the
shard lets go once its snapshot is taken, and the snapshot is a directory of its own (hard
links), so closing the shard's store does not touch it.
"""

from __future__ import annotations

import queue
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.backends.shardlog.protocol import PrunableLog, ShardLog
from nereus.adapters.offline.checkpoint_catalog import (
    catalog,
    check_floor,
    manifest_of,
    recovery_floor,
)
from nereus.adapters.offline.checkpoint_take import Taken, describe, upload_checkpoint
from nereus.config import CheckpointSettings
from nereus.engine.runtime.event_log import EventLog, null_event_log, safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.engine.shard.checkpoint_pacing import Pacing
from nereus.features import BASE_LEVEL
from nereus.records import CheckpointMark, encode
from nereus.shard import ShardId


@dataclass
class Job:
    shard: ShardId
    directory: Path
    checkpoint_id: str
    log: ShardLog
    now_ms: int
    owner_id: str  # the owner that took the snapshot, and its epoch (on the CHECKPOINT_MARK)
    fencing_epoch: int
    futures: list[Future[Taken]] = field(default_factory=list)
    # the feature level the shard's owner writes at: incremental checkpoints from 2
    feature_level: int = BASE_LEVEL


class Checkpointer:
    def __init__(self, objects: ObjectStore, settings: CheckpointSettings, *,
                 events: EventLog = null_event_log,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.objects = objects
        self.settings = settings
        # the process's due checkpoints, paced together (``checkpoint_pacing``)
        self.pacing = Pacing(settings.max_share, monotonic)
        self._events = events
        self._jobs: queue.Queue[Job | ShardLog | None] = queue.Queue()
        self._worker: Supervised | None = None
        self.taken = 0
        self.failed = 0
        self.last: dict[str, str] = {}  # shard -> the id of its last checkpoint taken

    def start(self, supervisor: Supervisor | None = None) -> None:
        owner = supervisor if supervisor is not None else Supervisor(self._events)
        self._worker = owner.spawn("checkpointer", "checkpointer", self.run)

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def close_when_done(self, log: ShardLog) -> None:
        """Close ``log`` once every job queued before now is finished (their
        CHECKPOINT_MARKs go to it): a released shard lets go without waiting for them."""
        self._jobs.put(log)

    def stop(self, timeout_s: float) -> None:
        self._jobs.put(None)
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(timeout_s)

    def run(self) -> None:
        """Finish queued snapshots until asked to stop (a supervised worker body).

        A failed checkpoint fails its own job (its requesters get the exception); the
        next job is unaffected.
        """
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if not isinstance(job, Job):
                self._close(job)  # a released shard's log, after its last checkpoint
                continue
            try:
                taken = self._finish(job)
            except Exception as exc:
                self.failed += 1
                safe_event(self._events, "checkpoint_failed", level="error",
                           shard=str(job.shard), checkpoint_id=job.checkpoint_id,
                           error=f"{type(exc).__name__}: {exc}")
                for future in job.futures:
                    future.set_exception(exc)
            else:
                self.taken += 1
                self.last[str(job.shard)] = taken.entry.checkpoint_id
                for future in job.futures:
                    future.set_result(taken)
            finally:
                shutil.rmtree(job.directory, ignore_errors=True)

    def _close(self, log: ShardLog) -> None:
        try:
            log.close()
        except Exception as exc:  # the shard is gone from here: say so and go on
            safe_event(self._events, "shard_log_close_failed", level="warning",
                       error=f"{type(exc).__name__}: {exc}")

    def _finish(self, job: Job) -> Taken:
        existing = catalog(self.objects, job.shard)
        parent = existing[-1] if existing else None
        manifest = describe(
            job.directory, job.shard, checkpoint_id=job.checkpoint_id,
            parent=parent.checkpoint_id if parent else None, now_ms=job.now_ms,
            parent_manifest=manifest_of(self.objects, parent) if parent else None,
            level=job.feature_level)
        taken = upload_checkpoint(self.objects, job.directory, manifest)
        entry = taken.entry
        job.log.append([encode(CheckpointMark(
            mutation_id=str(uuid.uuid4()), checkpoint_id=entry.checkpoint_id,
            owner_id=job.owner_id, fencing_epoch=job.fencing_epoch))])
        safe_event(self._events, "checkpoint_taken", shard=str(job.shard),
                   checkpoint_id=entry.checkpoint_id, applied_position=entry.applied_position,
                   digest=entry.digest, uploaded_bytes=taken.uploaded_bytes)
        if self.settings.prune_log and isinstance(job.log, PrunableLog):
            floor = recovery_floor(self.objects, job.shard, self.settings.keep)
            check_floor(floor, delete_before=floor.position)
            deleted = job.log.delete_before(floor.position)
            if deleted:
                safe_event(self._events, "log_pruned", shard=str(job.shard),
                           before=floor.position, segments=len(deleted))
        return taken
