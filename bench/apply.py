"""Apply throughput of one Delay Shard: SCHEDULE commands/s against a raw RocksDB baseline.

Usage::

    .venv/bin/python bench/apply.py [--records N] [--batch B] [--rounds R] [--json] [--profile]

What it does, in one run and one temp directory (removed afterwards unless ``--keep``;
each round's databases are removed when the round ends):

1. prepares N realistic SCHEDULE commands (``nereus.client.prepare_schedule``: 32-hex ids,
   a key, 1-2 headers, ~100-byte payload, delay within a day, lane ``local``) and appends
   them to a ``FileShardLog`` in groups (each group is one fdatasync'd append; its rate is
   reported as an extra figure);
2. applies them with ``ShardRunner(store, log, batch_records=B).run_until_caught_up()``
   into a fresh ``ShardStore`` and reports SCHEDULE commands applied per second; the
   store's ``write`` is wrapped (on the instance only) to count the keys each synced
   WriteBatch carries and to time the commits inside the run;
3. writes the same number of synced rocksdict WriteBatches, each carrying as many keys of
   the same sizes as the runner's first batch, into a fresh raw ``Rdict`` and reports the
   raw rate as keys/s and as "equivalent commands/s" (batches/s x records per batch), and
   the ratio ours/raw; steps 2 and 3 alternate for R rounds (default 3, each into fresh
   databases), every round's pair is printed, and the round with the median ratio is the
   one reported in detail; the targets are judged on that median and the report says
   whether every round met the ratio;
4. decomposes our cost without a profiler, each stage timed alone over all N records:
   (a) log read, (b) ``apply`` into an Overlay over an empty view (no store reads, no
   writes), split into codec.decode, sha256, the SCHEDULE handler (of which encoding the
   stored values) and the rest of apply (dedup lookup, Result, counters), (c)
   ``store.write`` of the batches from (b) into a fresh store, (d) the two point-read
   misses a SCHEDULE does (``result/c/<cmd>``, ``msg/<id>``), timed on the runner's own
   store right after its run, so memtables and SST files are as the runner saw them;
5. prints a compact report with the targets (>= 30,000 commands/s and >= 0.3 of the raw
   rate) and whether they were met, or JSON with ``--json``. ``--profile`` adds a
   cProfile pass of the runner over a fresh store (timed separately, never mixed into
   the figures).

Nothing here changes product code; the wrapping in step 2 is on one store instance.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from nereus.adapters.runner import ShardRunner
from nereus.adapters.shardlog.file import FileShardLog
from nereus.client import RouteRef, prepare_schedule
from nereus.records import codec
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import (
    decode_int,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apply_stages import (
    IDENTITY,
    profile_runner,
    sha_hex,
    stage_apply,
    stage_encode,
    stage_handler,
    stage_misses,
    stage_read,
    stage_timed,
    stage_write,
)

TARGET_COMMANDS_PER_S = 30_000
TARGET_RATIO = 0.3
DAY_MS = 86_400_000
ROUTE = RouteRef("default", 1)  # one partition: every command lands on default/0


# --------------------------------------------------------------------------------------
# workload


def make_payloads(n: int, *, seed: int, payload_bytes: int, now_ms: int) -> list[bytes]:
    """N prepared SCHEDULE commands' canonical bytes."""
    rng = random.Random(seed)
    out: list[bytes] = []
    content_types = ("application/json", "application/octet-stream", "text/plain")
    for _ in range(n):
        headers = {"trace-id": f"{rng.getrandbits(64):016x}"}
        if rng.random() < 0.5:
            headers["content-type"] = rng.choice(content_types)
        size = max(0, payload_bytes + rng.randint(-10, 10))
        prepared = prepare_schedule(
            ROUTE,
            command_id=f"{rng.getrandbits(128):032x}",
            delay_message_id=f"{rng.getrandbits(128):032x}",
            lane="local",
            deliver_at_ms=now_ms + rng.randrange(1_000, DAY_MS),
            key=f"customer-{rng.randrange(100_000)}",
            headers=headers,
            payload=rng.randbytes(size),
        )
        out.append(prepared.data)
    return out


def append_in_groups(log: FileShardLog, payloads: list[bytes], group: int) -> float:
    """Append ``payloads`` in groups of ``group`` (one synced append each); seconds taken."""
    started = time.perf_counter()
    for start in range(0, len(payloads), group):
        log.append(payloads[start:start + group])
    return time.perf_counter() - started


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


@dataclass
class RunnerPass:
    """The runner pass: wall time, records applied, commits, a sanity check, misses."""

    seconds: float
    applied: int
    commits: CommitStats
    check: dict[str, Any]
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
        check = {
            "records_applied": None if raw_records is None else decode_int(raw_records),
            "applied_position": store.applied_position(),
            "rejects": sum(1 for _ in store.scan_prefix(keys.REJECT)),
            "messages": sum(1 for _ in store.scan_prefix(keys.MSG)),
        }
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
    if ran.applied != n or ran.check["records_applied"] != n or ran.check["rejects"]:
        raise SystemExit(f"the runner did not apply every record cleanly: {ran.applied} "
                         f"{ran.check}")
    shutil.rmtree(root / f"db-{index}", ignore_errors=True)
    gc.collect()
    raw = raw_batches(ran.commits.first_batch, len(ran.commits.keys_per_batch))
    raw_s, raw_per_batch, raw_write_only_s = run_raw(root / f"raw-{index}", raw)
    del raw
    shutil.rmtree(root / f"raw-{index}", ignore_errors=True)
    gc.collect()
    return Round(n, min(batch, n), ran, raw_s, raw_per_batch, raw_write_only_s)


# --------------------------------------------------------------------------------------
# report


def _us(seconds: float, n: int) -> float:
    return seconds / n * 1e6 if n else 0.0


def _ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "p50": 0.0, "max": 0.0}
    return {
        "mean": statistics.fmean(values) * 1e3,
        "p50": statistics.median(values) * 1e3,
        "max": max(values) * 1e3,
    }


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    n, batch = args.records, args.batch
    log_dir = root / "log"
    now_ms = time.time_ns() // 1_000_000

    t0 = time.perf_counter()
    payloads = make_payloads(n, seed=args.seed, payload_bytes=args.payload_bytes, now_ms=now_ms)
    prepare_s = time.perf_counter() - t0
    record_bytes = sum(len(p) for p in payloads)

    log = FileShardLog(log_dir)
    try:
        append_s = append_in_groups(log, payloads, args.append_group)
    finally:
        log.close()
    del payloads
    gc.collect()

    # 2-3. ours and the raw baseline, alternating round by round -----------------------
    rounds = [run_round(root, log_dir, batch, n, index) for index in range(args.rounds)]
    by_ratio = sorted(rounds, key=lambda r: r.ratio)
    median = by_ratio[len(by_ratio) // 2]
    ran, commits, check = median.ours, median.ours.commits, median.ours.check
    run_s, miss_s = ran.seconds, ran.miss_seconds
    batches_run = len(commits.keys_per_batch)
    committed_keys = sum(commits.keys_per_batch)
    commit_s = sum(commits.seconds)
    ours = n / run_s
    template = commits.first_batch
    raw_s, raw_per_batch, raw_write_only_s = median.raw_seconds, median.raw_per_batch, \
        median.raw_write_only
    raw_keys = len(template) * batches_run
    raw_equiv = median.raw_equivalent

    # 4. decomposition ------------------------------------------------------------------
    read_s, read_batches = stage_read(log_dir, n, batch)
    decode_s = stage_timed(codec.decode, read_batches)
    sha_s = stage_timed(sha_hex, read_batches)
    apply_s, prepared, apply_level_writes = stage_apply(read_batches)
    handler_s = stage_handler(read_batches)
    del read_batches
    encode_s = stage_encode(prepared)
    write_s = stage_write(root / "db-write", prepared)
    del prepared
    gc.collect()

    key_bytes = [len(k) for k, _ in template]
    value_bytes = [0 if v is None else len(v) for _, v in template]
    report: dict[str, Any] = {
        "records": n,
        "batch_records": batch,
        "append_group": args.append_group,
        "machine": {"python": sys.version.split()[0]},
        "workload": {
            "record_bytes_mean": record_bytes / n,
            "prepare_per_s": n / prepare_s,
        },
        "append": {
            "seconds": append_s,
            "records_per_s": n / append_s,
            "mb_per_s": record_bytes / append_s / 1e6,
        },
        "ours": {
            "seconds": run_s,
            "commands_per_s": ours,
            "batches": batches_run,
            "keys_committed": committed_keys,
            "keys_per_record_committed": committed_keys / n,
            "keys_per_record_apply": apply_level_writes / n,
            "first_batch_key_bytes_mean": statistics.fmean(key_bytes),
            "first_batch_value_bytes_mean": statistics.fmean(value_bytes),
            "first_batch_bytes": sum(key_bytes) + sum(value_bytes),
            "commit_ms": _ms(commits.seconds),
            "commit_share": commit_s / run_s,
            "check": check,
        },
        "raw": {
            "seconds": raw_s,
            "batches": batches_run,
            "keys_per_batch": len(template),
            "keys_per_s": raw_keys / raw_s,
            "equivalent_commands_per_s": raw_equiv,
            "batch_ms": _ms(raw_per_batch),
        },
        "ratio": median.ratio,
        "rounds": [
            {"ours_commands_per_s": r.ours_rate, "raw_equivalent_commands_per_s": r.raw_equivalent,
             "ratio": r.ratio}
            for r in rounds
        ],
        "ratio_min": by_ratio[0].ratio,
        "stages_us_per_record": {
            "in_run_total": _us(run_s, n),
            "in_run_commit": _us(commit_s, n),
            "in_run_read_apply": _us(run_s - commit_s, n),
            "in_run_residual": _us(run_s - commit_s - read_s - apply_s - miss_s, n),
            "a_log_read": _us(read_s, n),
            "b_apply_empty_view": _us(apply_s, n),
            "b1_of_which_decode": _us(decode_s, n),
            "b2_of_which_sha256": _us(sha_s, n),
            "b3_of_which_schedule_handler": _us(handler_s, n),
            "b3a_of_which_value_encoding": _us(encode_s, n),
            "b4_of_which_rest_of_apply": _us(apply_s - decode_s - sha_s - handler_s, n),
            "c_store_write": _us(write_s, n),
            "d_store_get_misses_x2": _us(miss_s, n),
            "raw_write": _us(raw_s, n),
            "raw_of_which_db_write": _us(raw_write_only_s, n),
        },
        "targets": {
            "commands_per_s": TARGET_COMMANDS_PER_S,
            "ratio": TARGET_RATIO,
            "commands_per_s_met": ours >= TARGET_COMMANDS_PER_S,
            "ratio_met": median.ratio >= TARGET_RATIO,
            "ratio_met_every_round": by_ratio[0].ratio >= TARGET_RATIO,
        },
    }
    if args.profile:
        report["profile"] = profile_runner(root / "db-profile", log_dir, batch, args.profile_top)
    return report


def print_report(r: dict[str, Any]) -> None:
    ours, raw, st, tg = r["ours"], r["raw"], r["stages_us_per_record"], r["targets"]

    def mark(ok: bool) -> str:
        return "met" if ok else "MISSED"

    print(f"Nereus apply bench: {r['records']:,} SCHEDULE records, batch {r['batch_records']:,}, "
          f"~{r['workload']['record_bytes_mean']:.0f} B/record, Python {r['machine']['python']}")
    print(f"  prepare          {r['workload']['prepare_per_s']:>12,.0f} commands/s")
    print(f"  log append       {r['append']['records_per_s']:>12,.0f} records/s "
          f"({r['append']['mb_per_s']:.1f} MB/s, groups of {r['append_group']:,}, fdatasync each)")
    print()
    print(f"  ours (runner)    {ours['commands_per_s']:>12,.0f} commands/s/shard   "
          f"[target {tg['commands_per_s']:,}: {mark(tg['commands_per_s_met'])}]")
    print(f"                   {ours['keys_per_record_committed']:.3f} keys/record committed "
          f"({ours['keys_per_record_apply']:.1f} written per record by apply; lane and "
          "counters once per batch), "
          f"key {ours['first_batch_key_bytes_mean']:.0f} B, "
          f"value {ours['first_batch_value_bytes_mean']:.0f} B")
    cm = ours["commit_ms"]
    print(f"                   {ours['batches']} synced batches, commit {cm['mean']:.1f} ms mean / "
          f"{cm['p50']:.1f} p50 / {cm['max']:.1f} max = {ours['commit_share']:.0%} of run time")
    bm = raw["batch_ms"]
    print(f"  raw rocksdict    {raw['equivalent_commands_per_s']:>12,.0f} equivalent commands/s "
          f"({raw['keys_per_s']:,.0f} keys/s; {raw['keys_per_batch']:,} keys/batch, "
          f"{bm['mean']:.1f} ms mean / {bm['max']:.1f} max)")
    print(f"  ratio ours/raw   {r['ratio']:>12.3f}   "
          f"[target {tg['ratio']}: {mark(tg['ratio_met'])}]   (the median of "
          f"{len(r['rounds'])} rounds; figures above and below are that round's)")
    for number, one in enumerate(r["rounds"], 1):
        print(f"    round {number}: ours {one['ours_commands_per_s']:>8,.0f}, raw "
              f"{one['raw_equivalent_commands_per_s']:>9,.0f} equivalent commands/s, "
              f"ratio {one['ratio']:.3f}")
    print()
    budget = st["in_run_total"] * r["ratio"] / tg["ratio"]
    print(f"  targets          >= {tg['commands_per_s']:,} commands/s: "
          f"{mark(tg['commands_per_s_met'])}; >= {tg['ratio']} of raw: {mark(tg['ratio_met'])}, "
          f"in every round: {mark(tg['ratio_met_every_round'])} "
          f"(at this raw rate the ratio allows {budget:.1f} µs/record in the run)")
    print()
    print("  where the time goes (µs/record; (a)-(d) each timed alone over the same records):")
    rows = [
        ("runner, whole run", st["in_run_total"]),
        ("  commit: store.write in the run (RocksDB)", st["in_run_commit"]),
        ("  the rest: read + apply + store reads", st["in_run_read_apply"]),
        ("    (a) log read (FileShardLog.read)", st["a_log_read"]),
        ("    (b) apply into Overlay(EmptyView)", st["b_apply_empty_view"]),
        ("        codec.decode (+ canonical re-encode)", st["b1_of_which_decode"]),
        ("        sha256 of the record", st["b2_of_which_sha256"]),
        ("        SCHEDULE handler, with its Tx", st["b3_of_which_schedule_handler"]),
        ("          of which encoding msg+timeline+lane", st["b3a_of_which_value_encoding"]),
        ("        rest: dedup lookup, Result, counters", st["b4_of_which_rest_of_apply"]),
        ("    (d) 2 store.get misses, runner's store", st["d_store_get_misses_x2"]),
        ("    residual: runner loop, merge, caches", st["in_run_residual"]),
        ("(c) store.write of (b)'s batches, fresh DB", st["c_store_write"]),
        ("raw WriteBatch (same keys and sizes)", st["raw_write"]),
        ("    of which db.write (rest: Python puts)", st["raw_of_which_db_write"]),
    ]
    for label, value in rows:
        print(f"    {label:<44} {value:>8.2f}")
    print("  (the SCHEDULE handler validates the command, builds the Message, writes its timeline")
    print("  entry and work digest, and moves the lane's per-state counts; the rest of apply is")
    print("  the dedup lookup, the Result, the applied-position and records counters)")
    if "profile" in r:
        print()
        print(r["profile"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="N SCHEDULE commands")
    parser.add_argument("--batch", type=int, default=2_000, help="runner batch_records")
    parser.add_argument("--append-group", type=int, default=1_000,
                        help="records per synced log append while building the log")
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None,
                        help="parent of the temp directory (default: the system temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating runner/raw rounds; the round with the median ratio "
                        "is reported in detail")
    parser.add_argument("--profile", action="store_true",
                        help="add a cProfile pass of the runner (separate, not timed)")
    parser.add_argument("--profile-top", type=int, default=25)
    args = parser.parse_args(argv)
    if min(args.records, args.batch, args.append_group, args.rounds) < 1:
        parser.error("--records, --batch, --append-group and --rounds must be positive")

    root = Path(tempfile.mkdtemp(prefix="nereus-bench-apply-", dir=args.dir))
    try:
        report = measure(args, root)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
