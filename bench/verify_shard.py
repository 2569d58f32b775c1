"""The shard ``bench/verify.py`` measures: generated SCHEDULE records applied by the runner,
compacted, and cached.

Building a million-message shard takes a while, so the database is kept under the cache
directory, keyed by N, seed, batch, payload size, the key schema version and
``GENERATOR_VERSION``, and reused by later runs. The build time is recorded beside it
(``build.json``) when it is built.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from generated_schedules import IDENTITY, Workload, schedule_record
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import decode_int

GENERATOR_VERSION = 1  # bump when the generated records change: the cache key includes it
# bump when nereus.state.store's table options change (compression, filters): a cached
# database keeps the files it was built with, so its scans would measure the old layout
# (2: LZ4 upper levels, zstd with a dictionary on the bottommost; 3: LZ4HC on the bottommost)
STORE_LAYOUT = 3
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the broker time of every record
LANES = ("local", "email", "sms", "webhook")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardSpec:
    """Which shard to build: N messages from ``seed``, applied in batches of ``batch``."""

    messages: int
    seed: int
    batch: int
    payload_bytes: int

    def cache_key(self) -> str:
        return (f"shard-{self.messages}-seed{self.seed}-batch{self.batch}-p{self.payload_bytes}"
                f"-schema{keys.SCHEMA_VERSION}-gen{GENERATOR_VERSION}-store{STORE_LAYOUT}")


class GeneratedLog:
    """A Shard Log whose records are generated as the runner reads them, in order.

    Only what ``ShardRunner`` calls is implemented; generating on demand keeps a million
    records out of memory and off the disk (the file log is measured by bench/apply.py).
    """

    dense = True

    def __init__(self, n: int, *, seed: int, payload_bytes: int) -> None:
        self.n = n
        self.workload = Workload(payload_bytes=payload_bytes, base_ms=BASE_MS, lanes=LANES,
                                 content_types=("application/json", "text/plain"))
        self.rng = random.Random(seed)
        self.next_position = 0

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        if from_position != self.next_position:
            raise RuntimeError(f"generated log read at {from_position}, "
                               f"expected {self.next_position}")
        count = max(0, min(max_records, self.n - from_position))
        out = [LogRecord(from_position + i, BASE_MS, schedule_record(self.rng, self.workload))
               for i in range(count)]
        self.next_position += count
        return out

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:  # pragma: no cover - unused
        raise RuntimeError("the generated benchmark log is read-only")

    def end_position(self) -> int:
        return self.n

    def ack(self, position: int) -> None:
        pass

    def close(self) -> None:
        pass


class BuiltShard(msgspec.Struct, frozen=True):
    """What ``build.json`` records beside the cached database."""

    messages: int
    seconds: float
    messages_per_s: float
    batch_records: int
    built_at: str


class ShardBuild(BuiltShard, frozen=True):
    """The build as reported: ``reused`` when the database came from the cache."""

    reused: bool


def build_shard(path: Path, spec: ShardSpec, say: Callable[[str], None]) -> float:
    """Apply N generated SCHEDULE records into a new database at ``path``; seconds taken."""
    log = GeneratedLog(spec.messages, seed=spec.seed, payload_bytes=spec.payload_bytes)
    started = time.perf_counter()
    with ShardStore.open(path, identity=IDENTITY, create=True) as store:
        runner = ShardRunner(store, log, batch_records=spec.batch)
        step = max(spec.messages // 10, 1)
        mark = [step]

        def progress(applied: int) -> None:
            if runner.next_position >= mark[0]:
                say(f"  applied {runner.next_position:,} of {spec.messages:,} "
                    f"({time.perf_counter() - started:.0f}s)")
                mark[0] += step

        runner.run_until_caught_up(progress=progress)
    applied_s = time.perf_counter() - started
    with ShardStore.open(path) as compacting:
        compacting.compact()
    say(f"  compacted in {time.perf_counter() - started - applied_s:.1f}s")
    return time.perf_counter() - started


def _build_into(building: Path, spec: ShardSpec, say: Callable[[str], None]) -> BuiltShard:
    """Build, check that every record was applied, and write ``build.json``."""
    seconds = build_shard(building / "db", spec, say)
    with ShardStore.open(building / "db", read_only=True) as store:
        applied = store.applied_position()
        raw = store.get(keys.META_RECORDS)
    if applied != spec.messages - 1 or raw is None or decode_int(raw) != spec.messages:
        raise SystemExit(f"the build applied up to {applied}, not {spec.messages - 1}")
    record = BuiltShard(messages=spec.messages, seconds=seconds,
                        messages_per_s=spec.messages / seconds, batch_records=spec.batch,
                        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    (building / "build.json").write_text(
        json.dumps(msgspec.to_builtins(record), indent=2) + "\n")
    return record


def cached_shard(spec: ShardSpec, cache_dir: Path, *, rebuild: bool,
                 say: Callable[[str], None]) -> tuple[Path, ShardBuild]:
    """The cached database (built first if missing or ``rebuild``) and its build record."""
    root = cache_dir / spec.cache_key()
    marker = root / "build.json"
    if marker.is_file() and not rebuild:
        say(f"reusing the shard database in {root}")
        built = msgspec.json.decode(marker.read_bytes(), type=BuiltShard)
        return root / "db", ShardBuild(**msgspec.structs.asdict(built), reused=True)
    if root.exists():
        shutil.rmtree(root)
    cache_dir.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{root.name}.building-", dir=cache_dir))
    say(f"building a shard database of {spec.messages:,} messages in {root} ...")
    try:
        record = _build_into(building, spec, say)
        building.rename(root)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    say(f"built in {record.seconds:.1f}s ({spec.messages / record.seconds:,.0f} messages/s)")
    return root / "db", ShardBuild(**msgspec.structs.asdict(record), reused=False)
