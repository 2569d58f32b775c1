"""A checkpoint of a shard whose memtable is large is taken in two steps: RocksDB flushes
the memtable on its own thread first, and the snapshot (whose own flush holds the GIL) is
taken on a later turn, once that flush has ended (``engine.shard_checkpoints``)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.checkpoint_take import Taken
from nereus.config.storage import CheckpointSettings
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.engine.shard.checkpoint_triggers import PRE_FLUSH_BYTES, CheckpointTrigger
from nereus.engine.shard.checkpointer import Checkpointer, Job
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from tests.polling import wait_until

VALUE = b"v" * 100


class RecordingCheckpointer(Checkpointer):
    """Keeps the jobs handed to it instead of uploading them."""

    def __init__(self, root: Path) -> None:
        super().__init__(LocalObjectStore(root / "objects"), CheckpointSettings())
        self.jobs: list[Job] = []

    def submit(self, job: Job) -> None:
        self.jobs.append(job)


def _trigger(tmp_path: Path, store: ShardStore,
             checkpointer: Checkpointer) -> CheckpointTrigger:
    log = FileShardLog(tmp_path / "log", create=True)
    return CheckpointTrigger(ShardId.parse("default/0"), store, log, checkpointer=checkpointer,
                             staging=tmp_path / "staging", clock=TrustedClock(max_error_ms=20),
                             owner_id="owner-1", wake=threading.Event())


def _asked(tmp_path: Path, store: ShardStore,
           position: int) -> tuple[RecordingCheckpointer, CheckpointTrigger, Future[Taken]]:
    """A trigger over ``store`` asked for a checkpoint, after one turn at ``position``."""
    checkpointer = RecordingCheckpointer(tmp_path)
    trigger = _trigger(tmp_path, store, checkpointer)
    taken = trigger.request()
    trigger.maybe_take(applied_position=position, epoch=1)
    return checkpointer, trigger, taken


def _fill(store: ShardStore, count: int) -> None:
    store.write({f"k{n:08d}".encode(): VALUE for n in range(count)}, sync=False)


def test_a_full_memtable_is_flushed_before_the_snapshot(tmp_path: Path) -> None:
    """More than PRE_FLUSH_BYTES not flushed (in the write-ahead log): the turn the
    checkpoint is asked for starts RocksDB's flush and takes no snapshot (the loop sees
    ``flushing``); once the flush has ended, the next turn takes it, with next to nothing
    left to flush, and the image holds every pair written before it."""
    with ShardStore.open(tmp_path / "db", create=True) as store:
        _fill(store, 60_000)
        assert store.wal_bytes() > PRE_FLUSH_BYTES
        checkpointer, trigger, taken = _asked(tmp_path, store, 7)
        waiting = trigger.flushing  # (read once: the loop reads it again after each turn)
        assert checkpointer.jobs == [] and waiting and not taken.done()
        wait_until("the memtable's flush", lambda: not store.flush_running(), 30)
        assert store.wal_bytes() <= PRE_FLUSH_BYTES
        trigger.maybe_take(applied_position=7, epoch=1)
        assert not trigger.flushing
        (job,) = checkpointer.jobs
        assert job.futures == [taken]
    with ShardStore.open(job.directory, read_only=True) as image:
        assert image.get(b"k00000000") == VALUE and image.get(b"k00059999") == VALUE


def test_a_small_memtable_is_snapshotted_at_once(tmp_path: Path) -> None:
    """Less than PRE_FLUSH_BYTES not flushed: the checkpoint asked for is taken the same turn,
    with no flush asked for first."""
    with ShardStore.open(tmp_path / "db", create=True) as store:
        _fill(store, 100)
        checkpointer, trigger, taken = _asked(tmp_path, store, 3)
        assert not trigger.flushing
        (job,) = checkpointer.jobs
        assert job.futures == [taken]


def test_a_refused_request_ends_the_wait_for_its_flush(tmp_path: Path) -> None:
    """A request whose flush has begun and that is then refused (the loop stopping): the
    next turn finds nothing asked and nothing due, and the loop no longer waits for a flush
    (``flushing`` would keep it polling instead of resting)."""
    with ShardStore.open(tmp_path / "db", create=True) as store:
        _fill(store, 60_000)
        checkpointer, trigger, taken = _asked(tmp_path, store, 7)
        waiting = trigger.flushing
        assert waiting
        trigger.refuse_pending()
        assert taken.exception() is not None
        trigger.maybe_take(applied_position=7, epoch=1)
        assert not trigger.flushing and checkpointer.jobs == []
