"""``bench/scale.py``'s fill: N pending messages on a route of 4 shards, and what it costs.

The daemon runs on a fresh home (the default worker count: one per core, at most one per
shard). The bench queues SCHEDULE commands of 100 random bytes, due 1 h to 30 days ahead,
straight to the route's file logs, at most ``LEAD`` ahead of what the engine applied, so
the apply rate is measured while the feeder runs in both the first and the last tenth.
Then, with N pending: the engine's RSS, ``shard inspect`` beside ``nereus --help``, a
checkpoint's create and verify, the disk bytes per pending message (as the engine left
the databases, and after a full compaction), and the restart-to-ready time.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import msgspec

from nereus.client import RouteRef, prepare_schedule, queue
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from scale_engine import ROUTE, Daemon, make_home, nereus, open_logs, tree_bytes, wait_until

PARTITIONS = 4
GROUP = 10_000
LEAD = 200_000
DAY_MS = 86_400_000
PAYLOAD_BYTES = 100


class FillFigures(msgspec.Struct, frozen=True):
    pending: int
    partitions: int
    workers: int
    fill_s: float
    apply_first_tenth_per_s: int
    apply_last_tenth_per_s: int
    last_vs_first: float
    rss_tenth_mb: float
    rss_full_mb: float
    rss_full_vs_tenth: float
    # where the memory was at a tenth and at all (MB, the engine's gauges summed):
    # resident_memory, store_memory_budget, store_block_cache, store_memtable,
    # store_table_readers (indexes and filters, outside the budget)
    memory_tenth_mb: dict[str, float]
    memory_full_mb: dict[str, float]
    # the engine's CPU (front door and workers, RocksDB's threads in them) per command
    # applied in the first and the last tenth: more work per command, or less CPU for it
    cpu_us_first_tenth: int
    cpu_us_last_tenth: int
    scheduled_counted: int
    disk_bytes_per_pending: int
    disk_bytes_per_pending_compacted: int
    inspect_s: float
    help_s: float
    inspect_vs_help: float
    checkpoint_create_s: float
    checkpoint_verify_s: float
    checkpoint_bytes: int
    restart_to_ready_s: float


class _Sampler(threading.Thread):
    """Polls how many of the bench's commands the engine applied, its RSS and its CPU
    seconds; keeps a ``Sample`` each time."""

    def __init__(self, applied: Callable[[], int], rss_mb: Callable[[], float],
                 cpu_s: Callable[[], float], *, memory_mb: Callable[[], dict[str, float]],
                 memory_at: int) -> None:
        super().__init__(name="sampler", daemon=True)
        self._applied = applied
        self._rss_mb = rss_mb
        self._cpu_s = cpu_s
        self._memory_mb = memory_mb
        self._memory_at = memory_at
        self.memory: dict[str, float] = {}  # memory_mb() once memory_at were applied
        self.samples: list[Sample] = []
        self.applied = 0
        self.stopping = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self.stopping.wait(0.25):
            try:  # one failed sample (the admin socket busy, /proc racing) is skipped
                applied, rss, cpu = self._applied(), self._rss_mb(), self._cpu_s()
            except Exception as exc:
                print(f"scale: a sample failed: {exc}", file=sys.stderr)
                continue
            self.applied = applied
            self.samples.append(Sample(time.monotonic() - self.started_at, applied, rss, cpu))
            if not self.memory and applied >= self._memory_at:
                with contextlib.suppress(Exception):  # tried again at the next sample
                    self.memory = self._memory_mb()


class Sample(NamedTuple):
    seconds: float  # since the sampler started
    applied: int
    rss_mb: float
    cpu_s: float


def _crossing(samples: list[Sample], count: int) -> Sample:
    """The sample when ``count`` were applied: the time interpolated between the two
    samples around it, the RSS and CPU of the first sample at or past it."""
    before_t, before_n = 0.0, 0
    for t, applied, rss, cpu in samples:
        if applied >= count:
            share = (count - before_n) / max(applied - before_n, 1)
            return Sample(before_t + share * (t - before_t), count, rss, cpu)
        before_t, before_n = t, applied
    raise SystemExit(f"scale: {count:,} applied never sampled")


def _feed(logs_home: Path, pending: int, sampler: _Sampler, say: Callable[[str], None]) -> None:
    rng = random.Random(15)
    route = RouteRef(ROUTE, PARTITIONS)
    logs = open_logs(logs_home)
    base_ms = time.time_ns() // 1_000_000 + 3_600_000
    try:
        sent = 0
        while sent < pending:
            while sent - sampler.applied > LEAD:
                time.sleep(0.02)
            n = min(GROUP, pending - sent)
            prepared = [prepare_schedule(
                route, command_id=f"c{sent + i:031x}", delay_message_id=f"m{sent + i:031x}",
                lane="local", deliver_at_ms=base_ms + rng.randrange(30 * DAY_MS),
                key=f"customer-{rng.randrange(100_000)}", headers=None,
                payload=rng.randbytes(PAYLOAD_BYTES)) for i in range(n)]
            queue(prepared, logs)
            sent += n
            if sent % 1_000_000 == 0:
                say(f"fill: {sent:,} queued, {sampler.applied:,} applied")
    finally:
        logs.close()


def _compact(home: Path) -> None:
    for p in range(PARTITIONS):
        with ShardStore.open(HomeLayout(home).shard_state(ShardId(ROUTE, p))) as store:
            store.compact()


def _checkpoint(home: Path) -> tuple[float, float, int]:
    create_s, out = nereus(home, "checkpoint", "create", f"{ROUTE}/0", "--json")
    document = json.loads(out)
    checkpoint_id = document["checkpoint_id"]
    verify_s, _ = nereus(home, "checkpoint", "verify", checkpoint_id, "--json")
    return create_s, verify_s, int(document["size_bytes"])


def fill(root: Path, pending: int, say: Callable[[str], None], deadline_s: float) -> FillFigures:
    home = make_home(root, "scale-fill-", partitions=PARTITIONS, lanes={"local": ""})
    daemon = Daemon.start(home)
    workers = max(len(daemon.pids()) - 1, 1)
    wait_until(daemon.all_active, 120, "every shard ACTIVE")
    logs = open_logs(home)
    firsts = logs.end_positions()  # the engine's own records (identity, lane policy) came first
    logs.close()

    def applied() -> int:
        by_shard = {s["shard"]: s["applied_position"] for s in daemon.shards()}
        return sum(max(0, (-1 if by_shard[str(s)] is None else by_shard[str(s)]) + 1 - first)
                   for s, first in firsts.items())

    sampler = _Sampler(applied, daemon.rss_mb, daemon.cpu_s, memory_mb=daemon.memory_mb,
                       memory_at=max(pending // 10, 1))
    cpu_at_start = daemon.cpu_s()
    started = time.monotonic()
    sampler.start()
    _feed(home, pending, sampler, say)
    wait_until(lambda: sampler.applied >= pending, deadline_s, f"{pending:,} applied")
    fill_s = time.monotonic() - started
    sampler.stopping.set()
    sampler.join()
    samples = sampler.samples
    tenth = max(pending // 10, 1)
    at_tenth = _crossing(samples, tenth)
    at_last = _crossing(samples, pending - tenth)
    at_end = _crossing(samples, pending)
    t_tenth, rss_tenth = at_tenth.seconds, at_tenth.rss_mb
    t_last, t_end = at_last.seconds, at_end.seconds
    rss_full = daemon.rss_mb()
    memory_full = daemon.memory_mb()
    scheduled = daemon.states().get("SCHEDULED", 0)
    help_s, _ = nereus(home, "--help")
    inspect_s, _ = nereus(home, "shard", "inspect", f"{ROUTE}/0", "--json")
    create_s, verify_s, checkpoint_bytes = _checkpoint(home)
    daemon.stop()
    state = HomeLayout(home).root / "state"
    disk = tree_bytes(state)
    _compact(home)
    compacted = tree_bytes(state)
    ready_started = time.monotonic()
    daemon = Daemon.start(home)
    wait_until(daemon.all_active, 600, "every shard ACTIVE after the restart", 0.01)
    ready_s = time.monotonic() - ready_started
    daemon.stop()
    first_rate = tenth / max(t_tenth, 1e-3)
    last_rate = tenth / max(t_end - t_last, 1e-3)
    return FillFigures(
        pending=pending, partitions=PARTITIONS, workers=workers, fill_s=round(fill_s, 1),
        apply_first_tenth_per_s=round(first_rate), apply_last_tenth_per_s=round(last_rate),
        last_vs_first=round(last_rate / first_rate, 3),
        rss_tenth_mb=rss_tenth, rss_full_mb=rss_full,
        rss_full_vs_tenth=round(rss_full / max(rss_tenth, 0.1), 3),
        memory_tenth_mb=sampler.memory, memory_full_mb=memory_full,
        cpu_us_first_tenth=round((at_tenth.cpu_s - cpu_at_start) * 1e6 / tenth),
        cpu_us_last_tenth=round((at_end.cpu_s - at_last.cpu_s) * 1e6 / tenth),
        scheduled_counted=scheduled,
        disk_bytes_per_pending=disk // pending,
        disk_bytes_per_pending_compacted=compacted // pending,
        inspect_s=round(inspect_s, 3), help_s=round(help_s, 3),
        inspect_vs_help=round(inspect_s / help_s, 2),
        checkpoint_create_s=round(create_s, 2), checkpoint_verify_s=round(verify_s, 2),
        checkpoint_bytes=checkpoint_bytes, restart_to_ready_s=round(ready_s, 2))
