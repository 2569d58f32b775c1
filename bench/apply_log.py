"""The log ``bench/apply.py`` applies: N generated SCHEDULE commands in a ``FileShardLog``.

The commands are prepared first (timed: the client's prepare rate), then appended in
groups, each group one fdatasync'd append (timed: the log's append rate); both rates are
reported as extra figures beside the apply rate.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass
from pathlib import Path

from generated_schedules import Workload, schedule_record
from nereus.adapters.backends.shardlog.file_log import FileShardLog


def make_payloads(n: int, *, seed: int, payload_bytes: int, now_ms: int) -> list[bytes]:
    """N prepared SCHEDULE commands' canonical bytes, all on lane ``local``."""
    rng = random.Random(seed)
    workload = Workload(payload_bytes=payload_bytes, base_ms=now_ms, lanes=("local",),
                        content_types=("application/json", "application/octet-stream",
                                       "text/plain"))
    return [schedule_record(rng, workload) for _ in range(n)]


def append_in_groups(log: FileShardLog, payloads: list[bytes], group: int) -> float:
    """Append ``payloads`` in groups of ``group`` (one synced append each); seconds taken."""
    started = time.perf_counter()
    for start in range(0, len(payloads), group):
        log.append(payloads[start:start + group])
    return time.perf_counter() - started


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltLog:
    """What building the log measured."""

    prepare_s: float
    append_s: float
    record_bytes: int  # the commands' bytes, all together


def build_log(log_dir: Path, n: int, *, seed: int, payload_bytes: int,
              append_group: int) -> BuiltLog:
    """Prepare N commands and append them to a new file log at ``log_dir``."""
    now_ms = time.time_ns() // 1_000_000
    t0 = time.perf_counter()
    payloads = make_payloads(n, seed=seed, payload_bytes=payload_bytes, now_ms=now_ms)
    prepare_s = time.perf_counter() - t0
    record_bytes = sum(len(p) for p in payloads)

    log = FileShardLog(log_dir)
    try:
        append_s = append_in_groups(log, payloads, append_group)
    finally:
        log.close()
    del payloads
    gc.collect()
    return BuiltLog(prepare_s=prepare_s, append_s=append_s, record_bytes=record_bytes)
