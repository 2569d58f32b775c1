"""Checkpoint verify throughput beside ``sha256sum``, and ``nereus shard inspect`` on 1M messages.

Usage::

    .venv/bin/python bench/verify.py [--messages N] [--repeat R] [--cache-dir DIR]
                                     [--rebuild] [--json]

What it does, in one run:

1. **the shard**: a RocksDB database of shard ``default/0`` holding N SCHEDULE messages
   (default 1,000,000: 32-hex ids, a key, 1-2 headers, ~100-byte payload, due within a
   day, four lanes), built by ``nereus.adapters.runner.ShardRunner`` applying generated
   SCHEDULE records in synced batches of ``--batch``, then fully compacted. Building takes
   a while, so the database is kept under ``--cache-dir`` (default
   ``~/.cache/nereus-bench``), keyed by N, seed, batch, payload size and key schema
   version, and reused by later runs (``--rebuild`` builds it again). The build time is
   reported, measured when it was built.
2. **inspect**: the wall time of ``nereus shard inspect default/0 --db DB`` as an operator
   runs it (a fresh process: interpreter start, imports, open, report, Rich table), the
   median of R runs against the target (< 0.5 s), beside ``inspect_store`` alone in this
   process (open read-only + report) so start-up cost and the report itself are apart.
3. **verify**: a checkpoint of that database (``nereus.adapters.checkpoint_take.take_local``,
   timed and reported: it hashes the files and computes the digest too) in a scratch
   directory beside the cache (hard links). With the files warm in the page cache, each
   of R rounds times, in this order: ``sha256sum`` over the checkpoint's files (one
   subprocess), the file-checksum part of verify alone (``file_sha256`` over the
   manifest's files, as ``verify_directory`` calls it), the whole verify as ``nereus
   checkpoint verify`` runs it (``nereus.adapters.parallel_verify.verify_parallel``: every
   check of ``verify_directory`` — manifest, sizes, checksums, identity, read-only open,
   applied position, digest — with the files hashed on threads and the digest computed in
   a child process at the same time), and the core's single-threaded ``verify_directory``
   as a reference. Throughput is checkpoint bytes / median
   seconds (MB = 10^6 bytes); the ratio verify / sha256sum has a target of >= 0.8.
   Where verify's time goes is measured apart: opening the checkpoint read-only, iterating
   the replicated key range without hashing, and the digest recomputation
   (``digest_sorted`` over that scan, which ``verify_directory`` runs).

Nothing here changes product code. The scratch checkpoint is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from nereus.adapters.checkpoint_take import take_local
from nereus.adapters.runner import ShardRunner
from nereus.adapters.shardlog.protocol import LogRecord, Receipt
from nereus.checkpoint.verify import file_sha256, verify_directory
from nereus.client import RouteRef, prepare_schedule
from nereus.inspection import inspect_store
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.digest import digest_sorted
from nereus.state.store import ShardStore
from nereus.state.values import Identity, decode_int

TARGET_VERIFY_RATIO = 0.8
TARGET_INSPECT_S = 0.5
GENERATOR_VERSION = 1  # bump when the generated records change: the cache key includes it
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the broker time of every record
DAY_MS = 86_400_000
LANES = ("local", "email", "sms", "webhook")
SHARD = ShardId("default", 0)
ROUTE = RouteRef("default", 1)  # one partition: every message lands on default/0
IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
NEREUS = Path(sys.executable).parent / "nereus"


# --------------------------------------------------------------------------------------
# the shard: generated SCHEDULE records applied by the runner, cached


class GeneratedLog:
    """A Shard Log whose records are generated as the runner reads them, in order.

    Only what ``ShardRunner`` calls is implemented; generating on demand keeps a million
    records out of memory and off the disk (the file log is measured by bench/apply.py).
    """

    dense = True

    def __init__(self, n: int, *, seed: int, payload_bytes: int) -> None:
        self.n = n
        self.payload_bytes = payload_bytes
        self.rng = random.Random(seed)
        self.next_position = 0

    def _record(self) -> bytes:
        rng = self.rng
        headers = {"trace-id": f"{rng.getrandbits(64):016x}"}
        if rng.random() < 0.5:
            headers["content-type"] = rng.choice(("application/json", "text/plain"))
        size = max(0, self.payload_bytes + rng.randint(-10, 10))
        return prepare_schedule(
            ROUTE,
            command_id=f"{rng.getrandbits(128):032x}",
            delay_message_id=f"{rng.getrandbits(128):032x}",
            lane=rng.choice(LANES),
            deliver_at_ms=BASE_MS + rng.randrange(1_000, DAY_MS),
            key=f"customer-{rng.randrange(100_000)}",
            headers=headers,
            payload=rng.randbytes(size),
        ).data

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        if from_position != self.next_position:
            raise RuntimeError(f"generated log read at {from_position}, "
                               f"expected {self.next_position}")
        count = max(0, min(max_records, self.n - from_position))
        out = [LogRecord(from_position + i, BASE_MS, self._record()) for i in range(count)]
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


def cache_key(args: argparse.Namespace) -> str:
    return (f"shard-{args.messages}-seed{args.seed}-batch{args.batch}-p{args.payload_bytes}"
            f"-schema{keys.SCHEMA_VERSION}-gen{GENERATOR_VERSION}")


def build_shard(path: Path, args: argparse.Namespace, say: Callable[[str], None]) -> float:
    """Apply N generated SCHEDULE records into a new database at ``path``; seconds taken."""
    from rocksdict import Rdict

    from nereus.state.store import _options  # the store's own options: same table layout

    log = GeneratedLog(args.messages, seed=args.seed, payload_bytes=args.payload_bytes)
    started = time.perf_counter()
    with ShardStore.open(path, identity=IDENTITY, create=True) as store:
        runner = ShardRunner(store, log, batch_records=args.batch)
        step = max(args.messages // 10, 1)
        mark = [step]

        def progress(applied: int) -> None:
            if runner.next_position >= mark[0]:
                say(f"  applied {runner.next_position:,} of {args.messages:,} "
                    f"({time.perf_counter() - started:.0f}s)")
                mark[0] += step

        runner.run_until_caught_up(progress=progress)
    applied_s = time.perf_counter() - started
    db = Rdict(str(path), options=_options())
    try:
        db.compact_range(None, None)
    finally:
        db.close()
    say(f"  compacted in {time.perf_counter() - started - applied_s:.1f}s")
    return time.perf_counter() - started


def cached_shard(
    args: argparse.Namespace, say: Callable[[str], None]
) -> tuple[Path, dict[str, Any]]:
    """The cached database (built first if missing or ``--rebuild``) and its build record."""
    root = args.cache_dir / cache_key(args)
    marker = root / "build.json"
    if marker.is_file() and not args.rebuild:
        say(f"reusing the shard database in {root}")
        return root / "db", {**json.loads(marker.read_text()), "reused": True}
    if root.exists():
        shutil.rmtree(root)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{root.name}.building-", dir=args.cache_dir))
    say(f"building a shard database of {args.messages:,} messages in {root} ...")
    try:
        seconds = build_shard(building / "db", args, say)
        with ShardStore.open(building / "db", read_only=True) as store:
            applied = store.applied_position()
            raw = store.get(keys.META_RECORDS)
        if applied != args.messages - 1 or raw is None or decode_int(raw) != args.messages:
            raise SystemExit(f"the build applied up to {applied}, not {args.messages - 1}")
        record = {"messages": args.messages, "seconds": seconds,
                  "messages_per_s": args.messages / seconds, "batch_records": args.batch,
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (building / "build.json").write_text(json.dumps(record, indent=2) + "\n")
        building.rename(root)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    say(f"built in {seconds:.1f}s ({args.messages / seconds:,.0f} messages/s)")
    return root / "db", {**record, "reused": False}


# --------------------------------------------------------------------------------------
# measurements


def median_time(fn: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples


def measure_inspect(db: Path, repeat: int, scratch: Path) -> dict[str, Any]:
    home = scratch / "home"  # an empty home: no config, so no log lag is looked up
    home.mkdir()
    argv = [str(NEREUS), "--home", str(home), "shard", "inspect", "default/0", "--db", str(db)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    env.update(NO_COLOR="1", COLUMNS="160")

    def run_cli() -> None:
        subprocess.run(argv, check=True, capture_output=True, env=env)

    run_cli()  # warm: page cache, .pyc files
    wall, samples = median_time(run_cli, repeat)
    report_json = json.loads(subprocess.run(
        [argv[0], "--json", *argv[1:]], check=True, capture_output=True, env=env).stdout)

    def in_process() -> None:
        with ShardStore.open(db, identity=IDENTITY, read_only=True) as store:
            inspect_store(store)

    inproc, _ = median_time(in_process, repeat)
    help_wall, _ = median_time(lambda: subprocess.run(
        [str(NEREUS), "--help"], check=True, capture_output=True, env=env), repeat)
    return {"command": " ".join(argv), "wall_s": wall, "samples_s": samples,
            "in_process_s": inproc, "nereus_help_s": help_wall,
            "messages_by_state": report_json["messages_by_state"],
            "estimated_keys": report_json["db"]["estimated_keys"],
            "met": wall < TARGET_INSPECT_S}


def _files(directory: Path, names: list[str]) -> Iterator[Path]:
    return (directory / name for name in names)


def measure_verify(db: Path, repeat: int, scratch: Path) -> dict[str, Any]:
    staging = scratch / "staging"
    with ShardStore.open(db, identity=IDENTITY) as store:
        started = time.perf_counter()
        directory, manifest = take_local(store, SHARD, staging, checkpoint_id="cp-bench",
                                         parent=None, now_ms=BASE_MS)
        take_s = time.perf_counter() - started
    names = [f.name for f in manifest.files]
    paths = list(_files(directory, names))
    total = sum(f.size for f in manifest.files)
    expected = {f.name: f.sha256 for f in manifest.files}
    for path in paths:  # warm the page cache: both sides then read from memory
        file_sha256(path)

    def sha256sum() -> None:
        out = subprocess.run(["sha256sum", "--", *map(str, paths)], check=True,
                             capture_output=True, text=True).stdout
        got = {Path(line.split(maxsplit=1)[1]).name: line.split()[0]
               for line in out.splitlines()}
        if got != expected:
            raise SystemExit("sha256sum disagrees with the manifest")

    def checksums_only() -> None:
        for path in paths:
            file_sha256(path)

    def verify() -> None:
        """What `nereus checkpoint verify` runs: file hashing on threads, the pipelined
        digest in a child process (``nereus.adapters.digest_worker``)."""
        from nereus.adapters.parallel_verify import verify_parallel

        report = verify_parallel(directory, expected_shard=(SHARD.route, SHARD.partition))
        if not report.ok:
            raise SystemExit(f"verify failed: {report.document()}")

    def verify_core() -> None:
        """The core's single-threaded reference implementation."""
        report = verify_directory(directory, expected_shard=(SHARD.route, SHARD.partition))
        if not report.ok:
            raise SystemExit(f"verify failed: {report.document()}")

    rounds: dict[str, list[float]] = {"sha256sum": [], "checksums": [], "verify": [],
                                      "verify_core": []}
    for _ in range(repeat):
        for name, fn in (("sha256sum", sha256sum), ("checksums", checksums_only),
                         ("verify", verify), ("verify_core", verify_core)):
            started = time.perf_counter()
            fn()
            rounds[name].append(time.perf_counter() - started)
    med = {name: statistics.median(samples) for name, samples in rounds.items()}

    # where verify's time goes, each part alone
    def open_only() -> None:
        ShardStore.open(directory, read_only=True).close()

    def scan_only() -> int:
        with ShardStore.open(directory, read_only=True) as image:
            return sum(1 for _ in image.replicated())

    def digest_only() -> None:
        with ShardStore.open(directory, read_only=True) as image:
            digest = digest_sorted(image.replicated())
        if digest != manifest.digest:
            raise SystemExit("digest disagrees with the manifest")

    def logical_bytes() -> int:
        with ShardStore.open(directory, read_only=True) as image:
            return sum(len(k) + len(v)
                       for k, v in image.replicated())

    open_s, _ = median_time(open_only, repeat)
    pairs = scan_only()
    pair_bytes = logical_bytes()
    scan_s, _ = median_time(scan_only, repeat)
    digest_s, _ = median_time(digest_only, repeat)
    shutil.rmtree(directory)
    mb = total / 1e6
    verify_mb_s = mb / med["verify"]
    sha_mb_s = mb / med["sha256sum"]
    return {
        "files": len(names), "bytes": total, "replicated_pairs": pairs,
        "replicated_pair_bytes": pair_bytes,
        "take_local_s": take_s,
        "sha256sum": {"seconds": med["sha256sum"], "mb_per_s": sha_mb_s,
                      "samples_s": rounds["sha256sum"]},
        "checksums": {"seconds": med["checksums"], "mb_per_s": mb / med["checksums"],
                      "ratio_to_sha256sum": mb / med["checksums"] / sha_mb_s,
                      "samples_s": rounds["checksums"]},
        "verify": {"seconds": med["verify"], "mb_per_s": verify_mb_s,
                   "ratio_to_sha256sum": verify_mb_s / sha_mb_s,
                   "samples_s": rounds["verify"]},
        "verify_core": {"seconds": med["verify_core"], "mb_per_s": mb / med["verify_core"],
                        "ratio_to_sha256sum": mb / med["verify_core"] / sha_mb_s,
                        "samples_s": rounds["verify_core"]},
        "parts_s": {"checksums": med["checksums"], "db_open": open_s,
                    "scan_replicated": scan_s, "digest_with_open": digest_s,
                    "digest_hashing": digest_s - scan_s,
                    # what is left of the whole verify; clamped, as noise can make it < 0
                    "rest": max(0.0, med["verify"] - med["checksums"] - digest_s)},
        "met": verify_mb_s / sha_mb_s >= TARGET_VERIFY_RATIO,
    }


# --------------------------------------------------------------------------------------
# report


def print_report(r: dict[str, Any]) -> None:
    def mark(ok: bool) -> str:
        return "MET" if ok else "MISSED"

    b, i, v = r["build"], r["inspect"], r["verify"]
    print(f"Nereus verify/inspect bench: shard default/0 with {r['messages']:,} messages, "
          f"Python {r['python']}, {os.cpu_count()} CPUs")
    print(f"  shard build      {b['seconds']:.1f}s ({b['messages_per_s']:,.0f} messages/s, "
          f"batch {b['batch_records']:,}, built {b['built_at']}"
          f"{', reused from the cache' if b['reused'] else ''})")
    print(f"                   {r['db']}")
    print()
    print(f"  shard inspect    {i['wall_s'] * 1e3:8.0f} ms wall (median of {len(i['samples_s'])})"
          f"   [target < {TARGET_INSPECT_S * 1e3:.0f} ms: {mark(i['met'])}]")
    print(f"                   of which inspect_store in-process {i['in_process_s'] * 1e3:.0f} ms;"
          f" `nereus --help` alone {i['nereus_help_s'] * 1e3:.0f} ms")
    counts = ", ".join(f"{k} {n:,}" for k, n in i["messages_by_state"].items() if n)
    print(f"                   reports {counts}; ~{i['estimated_keys']:,} keys")
    print()
    mb = v["bytes"] / 1e6
    print(f"  checkpoint       {v['files']} files, {mb:,.1f} MB, {v['replicated_pairs']:,} "
          f"replicated pairs; take_local {v['take_local_s']:.2f}s")
    print(f"  sha256sum        {v['sha256sum']['mb_per_s']:8,.0f} MB/s "
          f"({v['sha256sum']['seconds']:.3f}s)")
    print(f"  verify checksums {v['checksums']['mb_per_s']:8,.0f} MB/s "
          f"({v['checksums']['seconds']:.3f}s)   ratio {v['checksums']['ratio_to_sha256sum']:.2f}")
    print(f"  verify (whole)   {v['verify']['mb_per_s']:8,.0f} MB/s "
          f"({v['verify']['seconds']:.3f}s)   ratio {v['verify']['ratio_to_sha256sum']:.2f}"
          f"   [target >= {TARGET_VERIFY_RATIO}: {mark(v['met'])}]")
    c = v["verify_core"]
    print(f"  (single-threaded core reference: {c['mb_per_s']:,.0f} MB/s, "
          f"{c['seconds']:.3f}s, ratio {c['ratio_to_sha256sum']:.2f})")
    p = v["parts_s"]
    print("  where verify's time goes (each part timed alone, median):")
    rows = [
        ("file checksums (SHA-256 of every file)", p["checksums"]),
        ("digest recomputation, with open", p["digest_with_open"]),
        ("  open read-only", p["db_open"]),
        ("  scan of the replicated range (no hashing)", p["scan_replicated"]),
        ("  hashing the pairs (digest - scan)", p["digest_hashing"]),
        ("rest (manifest, sizes, identity, ...)", p["rest"]),
    ]
    for label, seconds in rows:
        print(f"    {label:<46} {seconds:8.3f}s  {seconds / v['verify']['seconds']:5.0%}")
    print(f"  (the digest hashes {v['replicated_pair_bytes'] / 1e6:,.1f} MB of keys and values, "
          f"{v['replicated_pairs'] / p['digest_with_open']:,.0f} pairs/s = "
          f"{p['digest_with_open'] / v['replicated_pairs'] * 1e6:.2f} µs per pair)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000,
                        help="runner batch_records while building the shard")
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each timed step")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "nereus-bench")
    parser.add_argument("--rebuild", action="store_true", help="build the cached shard again")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.batch < 1 or args.repeat < 1:
        parser.error("--messages, --batch and --repeat must be positive")
    if shutil.which("sha256sum") is None:
        parser.error("sha256sum (coreutils) is not on PATH")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    db, build = cached_shard(args, say)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="verify-run-", dir=args.cache_dir) as tmp:
        scratch = Path(tmp)
        say("timing shard inspect ...")
        inspect = measure_inspect(db, args.repeat, scratch)
        say("taking a checkpoint and timing verify ...")
        verify = measure_verify(db, args.repeat, scratch)
    report = {"messages": args.messages, "python": sys.version.split()[0], "db": str(db),
              "cpus": os.cpu_count(), "build": build, "inspect": inspect, "verify": verify,
              "targets": {"inspect_wall_s": TARGET_INSPECT_S, "inspect_met": inspect["met"],
                          "verify_ratio": TARGET_VERIFY_RATIO, "verify_met": verify["met"]}}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
