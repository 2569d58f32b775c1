"""One round of ``bench/apply.py``: the runner into a fresh store, then raw synced
WriteBatches of the same shape into a fresh ``Rdict``.

The runner's store is a ``WatchedStore``: its ``write`` (on that one instance's class, a
subclass; product code is unchanged) counts the keys each synced WriteBatch carries, times
the commits and keeps the first batch, whose shape the raw baseline repeats.
"""

from __future__ import annotations

import gc
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from apply_stages import stage_misses
from generated_schedules import IDENTITY
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import decode_int

# --------------------------------------------------------------------------------------
# our rate: the runner


@dataclass
class CommitStats:
    """What the wrapped ``store.write`` saw during the runner pass."""

    keys_per_batch: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    first_batch: list[tuple[bytes, bytes | None]] = field(default_factory=list)


class WatchedStore(ShardStore):
    """A ShardStore whose commits, once ``stats`` is set, are counted and timed, the first
    kept (set after open: the identity stamp is not one of them)."""

    stats: CommitStats | None = None

    def write(self, writes: Mapping[bytes, bytes | None], *, sync: bool = True) -> None:
        stats = self.stats
        if stats is None:
            super().write(writes, sync=sync)
            return
        if not stats.first_batch:
            stats.first_batch = list(writes.items())
        started = time.perf_counter()
        super().write(writes, sync=sync)
        stats.seconds.append(time.perf_counter() - started)
        stats.keys_per_batch.append(len(writes))


def open_watched(root: Path, stats: CommitStats) -> ShardStore:
    """A new shard database at ``root`` whose commits from now on go to ``stats``."""
    store = WatchedStore.open(root, identity=IDENTITY, create=True)
    assert isinstance(store, WatchedStore)  # open makes an instance of the class it is on
    store.stats = stats
    return store


class RunnerCheck(msgspec.Struct, frozen=True):
    """What the runner's store holds after its pass (a clean pass applied all N)."""

    records_applied: int | None
    applied_position: int | None
    rejects: int
    messages: int


@dataclass
class RunnerPass:
    """The runner pass: wall time, records applied, commits, a sanity check, misses."""

    seconds: float
    applied: int
    commits: CommitStats
    check: RunnerCheck
    miss_seconds: float  # stage (d), timed on the runner's store right after the run


def run_runner(root: Path, log_dir: Path, batch: int, n: int) -> RunnerPass:
    stats = CommitStats()
    store = open_watched(root, stats)
    log = FileShardLog(log_dir, create=False)
    try:
        runner = ShardRunner(store, log, batch_records=batch)
        started = time.perf_counter()
        applied = runner.run_until_caught_up()
        seconds = time.perf_counter() - started
        miss_seconds = stage_misses(store, n)
        raw_records = store.get(keys.META_RECORDS)
        check = RunnerCheck(
            records_applied=None if raw_records is None else decode_int(raw_records),
            applied_position=store.applied_position(),
            rejects=sum(1 for _ in store.scan_prefix(keys.REJECT)),
            messages=sum(1 for _ in store.scan_prefix(keys.MSG)),
        )
    finally:
        log.close()
        store.close()
    return RunnerPass(seconds, applied, stats, check, miss_seconds)


# --------------------------------------------------------------------------------------
# the baseline: raw synced WriteBatches of the same shape


def raw_batches(
    template: list[tuple[bytes, bytes | None]], batches: int
) -> list[list[tuple[bytes, bytes]]]:
    """``batches`` key lists shaped like ``template`` (same count and sizes).

    Keys the runner rewrites every batch (meta, lane) stay the same; per-record keys get a
    unique tail so every batch inserts new keys, as the runner does.
    """
    fixed_prefixes = (keys.META[0], keys.LANE[0])
    out: list[list[tuple[bytes, bytes]]] = []
    serial = 0
    for _ in range(batches):
        batch: list[tuple[bytes, bytes]] = []
        for key, value in template:
            data = b"" if value is None else value
            if key[0] in fixed_prefixes or len(key) < 9:
                batch.append((key, data))
            else:
                serial += 1
                batch.append((key[:-8] + serial.to_bytes(8, "big"), data))
        out.append(batch)
    return out


def run_raw(
    path: Path, batches: list[list[tuple[bytes, bytes]]]
) -> tuple[float, list[float], float]:
    """Seconds for all batches (build + synced write), per-batch seconds, write-only seconds."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(path), options=options)
    sync = WriteOptions()
    sync.sync = True
    per_batch: list[float] = []
    write_only = 0.0
    try:
        started = time.perf_counter()
        for items in batches:
            t0 = time.perf_counter()
            wb = WriteBatch(raw_mode=True)
            for key, value in items:
                wb.put(key, value)
            t1 = time.perf_counter()
            db.write(wb, sync)
            t2 = time.perf_counter()
            per_batch.append(t2 - t0)
            write_only += t2 - t1
        seconds = time.perf_counter() - started
    finally:
        db.close()
    return seconds, per_batch, write_only


# --------------------------------------------------------------------------------------
# a round: the two, alternating


@dataclass
class Round:
    """One round: the runner over a fresh store, then raw batches of its first batch's shape."""

    records: int
    records_per_batch: int  # the runner's batch, so raw batches/s converts to commands/s
    ours: RunnerPass
    raw_seconds: float
    raw_per_batch: list[float]
    raw_write_only: float

    @property
    def ours_rate(self) -> float:
        return self.records / self.ours.seconds

    @property
    def raw_equivalent(self) -> float:
        """Raw batches/s times the records the runner put in one batch."""
        return len(self.raw_per_batch) / self.raw_seconds * self.records_per_batch

    @property
    def ratio(self) -> float:
        return self.ours_rate / self.raw_equivalent


def run_round(root: Path, log_dir: Path, batch: int, n: int, index: int) -> Round:
    """Ours then raw, each into a fresh database that is removed afterwards.

    Rounds alternate the two so that both see the disk in the same state: synced write
    latency on this machine drifts by 10-15% over a minute, which moved the ratio of a
    single pair of passes by as much.
    """
    ran = run_runner(root / f"db-{index}", log_dir, batch, n)
    if ran.applied != n or ran.check.records_applied != n or ran.check.rejects:
        raise SystemExit(f"the runner did not apply every record cleanly: {ran.applied} "
                         f"{msgspec.structs.asdict(ran.check)}")
    shutil.rmtree(root / f"db-{index}", ignore_errors=True)
    gc.collect()
    raw = raw_batches(ran.commits.first_batch, len(ran.commits.keys_per_batch))
    raw_s, raw_per_batch, raw_write_only_s = run_raw(root / f"raw-{index}", raw)
    del raw
    shutil.rmtree(root / f"raw-{index}", ignore_errors=True)
    gc.collect()
    return Round(n, min(batch, n), ran, raw_s, raw_per_batch, raw_write_only_s)
