"""An incremental checkpoint beside a full one of the same state, after 1 % of a shard changed.

Usage::

    .venv/bin/python bench/checkpoint.py [--messages N] [--change PCT] [--store s3|files]
                                         [--repeat R] [--cache-dir DIR] [--rebuild] [--json]

1. **the shard**: ``bench/verify_shard.py``'s database of N generated SCHEDULE messages
   (default 100,000; the issue's figure is 1,000,000), built once and cached, copied into a
   scratch directory as the live shard.
2. **parent**: a checkpoint of it at feature level 2 into an empty catalog (so full: there
   is no parent to borrow from), in a fresh bucket of the local S3 (``scripts/services
   env``) or a local directory (``--store files``).
3. **the change**: ``--change`` percent of N (default 1) new SCHEDULE messages applied by
   the runner, as an owner would.
4. **side by side**, on the same state: the incremental checkpoint (level 2, borrowing the
   unchanged files of the newest checkpoint) and a full one (level 1, as 0.1.0 takes it)
   into the same store. For each: its create time (snapshot, hashes, digest, upload,
   catalog; the incremental one reads only the files no earlier checkpoint of this process
   hashed, the full one every file, as 0.1.0 does) and bytes uploaded; then its
   ``verify_entry`` (download + every check) and ``restore_into`` (download, verify, move)
   times; and the state digest of the restored image alone (``process_digest``, one child:
   the part of create time that grows with the state). Steps 3-4 run ``--repeat`` times
   (default 3; each round's incremental borrows from the previous round's full one);
   medians are reported. Targets: incremental create time and bytes <= 10 % of the full
   one's; verify and restore not slower.

Nothing here changes product code; the scratch directory and the bucket are removed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from generated_schedules import SHARD
from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.backends.objectstore.s3 import S3ObjectStore
from nereus.adapters.offline import checkpoint_take
from nereus.adapters.offline.checkpoint_restore import restore_into, verify_entry
from nereus.adapters.offline.checkpoint_take import Taken, checkpoint_now
from nereus.adapters.offline.parallel_verify import process_digest
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.state.store import ShardStore
from verify_shard import GeneratedLog, ShardSpec, cached_shard

ROOT = Path(__file__).resolve().parent.parent


class Figures(msgspec.Struct, frozen=True):
    create_s: float
    uploaded_bytes: int
    size_bytes: int
    files: int
    borrowed_files: int
    verify_s: float
    restore_s: float
    digest_s: float  # the image's state digest alone (one child process), part of create_s


class Round(msgspec.Struct, frozen=True):
    full: Figures
    incremental: Figures


class Report(msgspec.Struct, frozen=True):
    messages: int
    changed: int  # per round
    store: str
    parent_create_s: float
    rounds: list[Round]
    full: Figures  # each field the median over the rounds
    incremental: Figures
    create_ratio: float  # of the medians
    bytes_ratio: float


@contextmanager
def object_store(kind: str, scratch: Path) -> Iterator[ObjectStore]:
    if kind == "files":
        yield LocalObjectStore(scratch / "objects")
        return
    proc = subprocess.run([str(ROOT / "scripts" / "services"), "env"], capture_output=True,
                          text=True, check=True)
    env = dict(line.removeprefix("export ").split("=", 1) for line in proc.stdout.splitlines()
               if "=" in line)
    bucket = f"nereus-bench-{uuid.uuid4().hex[:12]}"
    store = S3ObjectStore(bucket, prefix="bench", endpoint_url=env["NEREUS_S3_ENDPOINT"],
                          region=env.get("NEREUS_S3_REGION", "us-east-1"),
                          access_key_id=env["NEREUS_S3_ACCESS_KEY"],
                          secret_access_key=env["NEREUS_S3_SECRET_KEY"], create_bucket=True)
    try:
        yield store
    finally:
        for info in list(store.list("")):
            store.delete(info.key)
        store._client.delete_bucket(Bucket=bucket)  # the bench made it


def timed(call: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def take(store: ShardStore, objects: ObjectStore, scratch: Path, level: int
         ) -> tuple[float, Taken]:
    seconds, taken = timed(lambda: checkpoint_now(
        store, SHARD, objects, scratch / "staging", token=uuid.uuid4().hex[:8],
        now_ms=time.time_ns() // 1_000_000, level=level))
    assert isinstance(taken, Taken)
    return seconds, taken


def figures(taken: Taken, create_s: float, objects: ObjectStore, scratch: Path) -> Figures:
    verify_s, report = timed(lambda: verify_entry(objects, taken.entry))
    assert getattr(report, "ok", False), f"{taken.entry.checkpoint_id} does not verify"
    target = scratch / f"restored-{taken.entry.checkpoint_id}"
    restore_s, restored = timed(lambda: restore_into(objects, taken.entry, target))
    assert getattr(restored, "ok", False), f"{taken.entry.checkpoint_id} does not restore"
    digest_s, _ = timed(lambda: process_digest(target, parts=1))
    shutil.rmtree(target)
    return Figures(create_s=create_s, uploaded_bytes=taken.uploaded_bytes,
                   size_bytes=taken.size_bytes, files=len(taken.manifest.files),
                   borrowed_files=sum(1 for f in taken.manifest.files if f.checkpoint),
                   verify_s=verify_s, restore_s=restore_s, digest_s=digest_s)


def median_figures(all_figures: list[Figures]) -> Figures:
    fields = msgspec.structs.fields(Figures)
    return Figures(**{f.name: statistics.median(getattr(x, f.name) for x in all_figures)
                      for f in fields})


def change_shard(store: ShardStore, count: int, seed: int) -> None:
    """Apply ``count`` new generated SCHEDULE records, as an owner would."""
    start = (store.applied_position() or 0) + 1
    change = GeneratedLog(start + count, seed=seed, payload_bytes=100)
    change.next_position = start  # positions start..: records of another seed
    ShardRunner(store, change).run_until_caught_up()


def run(args: argparse.Namespace, say: Callable[[str], None]) -> Report:
    spec = ShardSpec(messages=args.messages, seed=1, batch=10_000, payload_bytes=100)
    cached, _ = cached_shard(spec, args.cache_dir, rebuild=args.rebuild, say=say)
    changed = args.messages * args.change // 100
    with tempfile.TemporaryDirectory(prefix="nereus-bench-cp-", dir=args.cache_dir) as tmp:
        scratch = Path(tmp)
        shutil.copytree(cached, scratch / "live")
        with object_store(args.store, scratch) as objects, \
                ShardStore.open(scratch / "live") as store:
            parent_s, _ = take(store, objects, scratch, level=2)
            say(f"parent (full) checkpoint in {parent_s:.2f}s")
            rounds = []
            for number in range(args.repeat):  # each incremental's parent: the last full
                say(f"round {number + 1}: {changed:,} changes, incremental and full checkpoint")
                change_shard(store, changed, seed=2 + number)
                incremental_s, incremental = take(store, objects, scratch, level=2)
                checkpoint_take._HASHED.clear()  # the full one as 0.1.0 takes it: every file read
                full_s, full = take(store, objects, scratch, level=1)
                rounds.append(Round(full=figures(full, full_s, objects, scratch),
                                    incremental=figures(incremental, incremental_s, objects,
                                                        scratch)))
    whole = median_figures([r.full for r in rounds])
    inc = median_figures([r.incremental for r in rounds])
    return Report(messages=args.messages, changed=changed, store=args.store,
                  parent_create_s=parent_s, rounds=rounds, full=whole, incremental=inc,
                  create_ratio=inc.create_s / whole.create_s,
                  bytes_ratio=inc.uploaded_bytes / whole.uploaded_bytes)


def print_report(r: Report) -> None:
    print(f"shard of {r.messages:,} messages, {r.changed:,} changed per round, store "
          f"{r.store}, median of {len(r.rounds)} round(s)")
    print(f"{'':12} {'create s':>9} {'digest s':>9} {'uploaded MB':>12} {'image MB':>9} "
          f"{'files':>6} {'borrowed':>8} {'verify s':>9} {'restore s':>10}")
    for name, f in (("full", r.full), ("incremental", r.incremental)):
        print(f"{name:12} {f.create_s:9.2f} {f.digest_s:9.2f} {f.uploaded_bytes / 1e6:12.1f} "
              f"{f.size_bytes / 1e6:9.1f} {f.files:6.0f} {f.borrowed_files:8.0f} "
              f"{f.verify_s:9.2f} {f.restore_s:10.2f}")
    print(f"incremental / full: create {r.create_ratio:.1%} (target <= 10%), bytes "
          f"{r.bytes_ratio:.1%} (target <= 10%)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--change", type=int, default=1, help="percent of N changed")
    parser.add_argument("--store", choices=("s3", "files"), default="s3")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians reported)")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "nereus-bench")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    say: Callable[[str], None] = (lambda m: print(m, file=sys.stderr)) if args.json else print
    report = run(args, say)
    if args.json:
        print(json.dumps(msgspec.to_builtins(report), indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
