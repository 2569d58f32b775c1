"""Checkpoint verify throughput beside ``sha256sum``, and ``nereus shard inspect`` on 1M messages.

Usage::

    .venv/bin/python bench/verify.py [--messages N] [--repeat R] [--cache-dir DIR]
                                     [--rebuild] [--json]

What it does, in one run:

1. **the shard**: a RocksDB database of shard ``default/0`` holding N SCHEDULE messages
   (default 1,000,000: 32-hex ids, a key, 1-2 headers, ~100-byte payload, due within a
   day, four lanes), built by ``nereus.adapters.offline.shard_runner.ShardRunner`` applying
   generated SCHEDULE records in synced batches of ``--batch``, then fully compacted. Building takes
   a while, so the database is kept under ``--cache-dir`` (default
   ``~/.cache/nereus-bench``), keyed by N, seed, batch, payload size and key schema
   version, and reused by later runs (``--rebuild`` builds it again). The build time is
   reported, measured when it was built.
2. **inspect**: the wall time of ``nereus shard inspect default/0 --db DB`` as an operator
   runs it (a fresh process on a pseudo-terminal 160 columns wide: interpreter start,
   imports, open, report, the tables drawn with bold headers), the median of R runs,
   beside ``nereus --help`` (target: inspect < 2x --help, in the same run); the same line
   through a pipe, and ``inspect_store`` alone in this process (open
   read-only + report) so start-up cost and the report itself are apart; the report's
   disk figures are printed. Each command runs from its bytecode, as an installed one
   does (``installed_cli``).
3. **verify**: a checkpoint of that database
   (``nereus.adapters.offline.checkpoint_take.take_local``, timed and reported: it hashes the files
   and computes the digest too) in a scratch directory beside the cache (hard links). With the files
   warm in the page cache, each of R rounds times, in this order: ``sha256sum`` over the
   checkpoint's files (one subprocess), the file-checksum part of verify alone (``file_hash`` over
   the manifest's files with the checksum its format lists, BLAKE3 for format 2, as
   ``verify_directory`` calls it; SHA-256 in Python beside it), the whole verify as ``nereus
   checkpoint verify`` runs it (``nereus.adapters.offline.parallel_verify.verify_parallel``: every
   check of ``verify_directory`` — manifest, sizes, checksums, identity, read-only open,
   applied position, digest — with the files hashed on threads and the state digest's key
   ranges computed by child processes, one per core, at the same time), and the core's
   single-threaded ``verify_directory`` as a reference. Throughput is checkpoint bytes /
   median seconds (MB = 10^6 bytes); the ratio whole verify / sha256sum, both timed in
   this run, has a target of >= 2. Where verify's time goes is measured apart: opening the
   checkpoint read-only, iterating the replicated key range without hashing, the digest
   recomputation in one process (``digest_sorted`` over that scan, which
   ``verify_directory`` runs) and by key range in child processes (``process_digest``).

Nothing here changes product code. The scratch checkpoint is removed afterwards. The
parts: ``verify_shard`` builds and caches the shard (step 1), ``verify_timing`` times
inspect and verify (steps 2 and 3); this module prints the report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import msgspec

from verify_shard import ShardBuild, ShardSpec, cached_shard
from verify_timing import (
    TARGET_INSPECT_HELP_RATIO,
    TARGET_VERIFY_RATIO,
    InspectFigures,
    VerifyFigures,
    measure_inspect,
    measure_verify,
)


class Targets(msgspec.Struct, frozen=True):
    inspect_to_help_ratio: float
    inspect_met: bool
    verify_ratio: float
    verify_met: bool


class VerifyReport(msgspec.Struct, frozen=True):
    """Everything ``bench/verify.py`` reports (the JSON keys, in order)."""

    messages: int
    python: str
    db: str
    cpus: int | None
    build: ShardBuild
    inspect: InspectFigures
    verify: VerifyFigures
    targets: Targets


def _mark(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def _print_shard_and_inspect(r: VerifyReport) -> None:
    b, i = r.build, r.inspect
    print(f"Nereus verify/inspect bench: shard default/0 with {r.messages:,} messages, "
          f"Python {r.python}, {os.cpu_count()} CPUs")
    print(f"  shard build      {b.seconds:.1f}s ({b.messages_per_s:,.0f} messages/s, "
          f"batch {b.batch_records:,}, built {b.built_at}"
          f"{', reused from the cache' if b.reused else ''})")
    print(f"                   {r.db}")
    print()
    print(f"  shard inspect    {i.wall_s * 1e3:8.0f} ms on a terminal "
          f"(median of {len(i.samples_s)}), `nereus --help` {i.nereus_help_s * 1e3:.0f} ms: "
          f"ratio {i.ratio_to_help:.2f}"
          f"   [target < {TARGET_INSPECT_HELP_RATIO}x --help: {_mark(i.met)}]")
    print(f"                   through a pipe: "
          f"{i.piped_wall_s * 1e3:.0f} ms, ratio {i.piped_ratio_to_help:.2f}")
    print(f"                   of which inspect_store in-process {i.in_process_s * 1e3:.0f} ms")
    counts = ", ".join(f"{k} {n:,}" for k, n in i.messages_by_state.items() if n)
    print(f"                   reports {counts}; ~{i.estimated_keys:,} keys")
    print(f"                   disk {i.disk}")


def _print_verify(v: VerifyFigures) -> None:
    mb = v.bytes / 1e6
    print(f"  checkpoint       {v.files} files, {mb:,.1f} MB, {v.replicated_pairs:,} "
          f"replicated pairs; take_local {v.take_local_s:.2f}s")
    print(f"  sha256sum        {v.sha256sum.mb_per_s:8,.0f} MB/s ({v.sha256sum.seconds:.3f}s)")
    print(f"  verify checksums {v.checksums.mb_per_s:8,.0f} MB/s "
          f"({v.checksums.seconds:.3f}s)   ratio {v.checksums.ratio_to_sha256sum:.2f}"
          f"   ({v.checksum}, what a format 2 manifest lists)")
    print(f"  (SHA-256 in Python, format 1's checksum: {v.sha256_python.mb_per_s:,.0f} MB/s, "
          f"{v.sha256_python.seconds:.3f}s)")
    print(f"  verify (whole)   {v.verify.mb_per_s:8,.0f} MB/s "
          f"({v.verify.seconds:.3f}s)   ratio {v.verify.ratio_to_sha256sum:.2f}"
          f"   [target >= {TARGET_VERIFY_RATIO}x sha256sum: {_mark(v.met)}]")
    cores = os.cpu_count() or 1
    print(f"  CPU seconds      sha256sum {v.sha256sum.cpu_s:.3f}s, whole verify "
          f"{v.verify.cpu_s:.3f}s over {cores} cores: at best "
          f"{v.verify.cpu_s / cores:.3f}s wall, ratio <= "
          f"{v.sha256sum.cpu_s / (v.verify.cpu_s / cores):.2f} when the cores are ours")
    c = v.verify_core
    print(f"  (single-threaded core reference: {c.mb_per_s:,.0f} MB/s, "
          f"{c.seconds:.3f}s, ratio {c.ratio_to_sha256sum:.2f})")
    p = v.parts_s
    print("  where verify's time goes (each part timed alone, median):")
    rows = [
        (f"file checksums ({v.checksum} of every file)", p.checksums),
        ("digest recomputation, with open", p.digest_with_open),
        ("  open read-only", p.db_open),
        ("  scan of the replicated range (no hashing)", p.scan_replicated),
        ("  hashing the pairs (digest - scan)", p.digest_hashing),
        ("digest by key range, here and one child a core", p.parallel_digest),
        ("rest (manifest, sizes, identity, ...)", p.rest),
    ]
    for label, seconds in rows:
        print(f"    {label:<46} {seconds:8.3f}s  {seconds / v.verify.seconds:5.0%}")
    print(f"  (the digest hashes {v.replicated_pair_bytes / 1e6:,.1f} MB of keys and values, "
          f"{v.replicated_pairs / p.digest_with_open:,.0f} pairs/s = "
          f"{p.digest_with_open / v.replicated_pairs * 1e6:.2f} µs per pair)")


def print_report(r: VerifyReport) -> None:
    _print_shard_and_inspect(r)
    print()
    _print_verify(r.verify)


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

    spec = ShardSpec(messages=args.messages, seed=args.seed, batch=args.batch,
                     payload_bytes=args.payload_bytes)
    db, build = cached_shard(spec, args.cache_dir, rebuild=args.rebuild, say=say)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="verify-run-", dir=args.cache_dir) as tmp:
        scratch = Path(tmp)
        say("timing shard inspect ...")
        inspect = measure_inspect(db, args.repeat, scratch)
        say("taking a checkpoint and timing verify ...")
        verify = measure_verify(db, args.repeat, scratch)
    report = VerifyReport(
        messages=args.messages, python=sys.version.split()[0], db=str(db),
        cpus=os.cpu_count(), build=build, inspect=inspect, verify=verify,
        targets=Targets(inspect_to_help_ratio=TARGET_INSPECT_HELP_RATIO, inspect_met=inspect.met,
                        verify_ratio=TARGET_VERIFY_RATIO, verify_met=verify.met))
    if args.json:
        print(json.dumps(msgspec.to_builtins(report), indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
