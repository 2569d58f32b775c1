"""A shard's database as its backlog grows: level 0's compaction trigger against RocksDB's,
or the bloom filter's bits per key against the usual 10.

Usage::

    .venv/bin/python bench/lsm_backlog.py [--commands N] [--triggers 4,8,16] [--json]
    .venv/bin/python bench/lsm_backlog.py --bloom-bits 10,16 [--commands N] [--json]

What it does, in one run, for each level-0 compaction trigger (4 is RocksDB's default and
the baseline; ``nereus.state.store_options.L0_COMPACTION_TRIGGER`` is what shard databases use),
or with ``--bloom-bits`` for each filter size at the shard databases' own trigger (10 bits,
about 1 % false positives, is the baseline; ``nereus.state.store_options.BLOOM_BITS_PER_KEY`` is
what shard databases use):

* two databases are filled at once, one per process, as two engine workers fill their
  shards on a 2-core machine: each with N schedule-like commands (default 2,500,000, one
  shard's share of ``bench/scale.py``'s ten million) in batches of 1,000, with the shard
  database's own options (``nereus.state.store_options.shard_options``, a 128 MiB budget's 16 MiB
  memtables). A command writes what a SCHEDULE writes, at about its size: the message
  (``msg/<id>``, 300 bytes, 200 of them random), its timeline entry at a random time in 30
  days and its dedup result, with UUID-like random ids; and reads what apply reads: the
  message and the result (both missing). Every batch also seeks the head of the
  timeline 20 times, as the scheduler does;
* printed per trigger: the fill's wall time (both processes), the CPU of RocksDB's
  background threads (flushes and compactions: the process's CPU less the writing
  thread's), the bytes compactions wrote, and the wall time of the first and the last
  tenth of the fill with their ratio (``bench/scale.py``'s apply target is >= 0.8), the
  writing thread's CPU in the first and the last tenth (the reads and writes of apply:
  what grows with the backlog), and RocksDB's count of filter probes, of the probes a
  filter let through for a key the table did not hold (each costs a data block read:
  every read here misses) and of data blocks read from disk; each beside the baseline's.

The databases live in a scratch directory and are removed. Nothing here changes product
code.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BASELINE = 4
BASELINE_BITS = 10
BATCH = 1_000
SEEKS = 20
DAY_MS = 86_400_000


class Fill(NamedTuple):
    """One database's fill."""

    wall_s: float
    background_cpu_s: float
    compaction_gb: float
    first_tenth_s: float
    last_tenth_s: float
    first_tenth_cpu_s: float
    last_tenth_cpu_s: float
    filter_probes: int
    filter_false_positives: int
    data_blocks_read: int


def _fill(path: str, trigger: int, bits: int, commands: int) -> Fill:
    from rocksdict import Rdict, WriteBatch, WriteOptions

    from nereus.state.memory import StoreMemory
    from nereus.state.store_options import shard_options

    options = shard_options(StoreMemory.of(128, shards=2), bloom_bits=bits)
    options.enable_statistics()
    options.create_if_missing(True)
    options.set_level_zero_file_num_compaction_trigger(trigger)
    options.set_level_zero_slowdown_writes_trigger(max(20, 3 * trigger))
    options.set_level_zero_stop_writes_trigger(max(36, 4 * trigger))
    db = Rdict(path, options=options, column_families={"default": options})
    rng = random.Random(os.getpid())
    base = 1_800_000_000_000
    tenth = max(commands // 10, BATCH)
    tenths: list[float] = []
    tenths_cpu: list[float] = []
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    start_thread = time.thread_time()
    mark, mark_cpu = start_wall, start_thread
    try:
        for done in range(BATCH, commands + BATCH, BATCH):
            for _ in range(SEEKS):
                head = b"\x03local\x00" + (base + rng.randrange(DAY_MS)).to_bytes(8, "big")
                for _key in zip(range(4), db.keys(from_key=head), strict=False):
                    pass
            batch = WriteBatch(raw_mode=True)
            for _ in range(BATCH):
                message = rng.randbytes(16).hex().encode()
                db.get(b"\x02" + message)
                db.get(b"\x04c/" + message)
                batch.put(b"\x02" + message, rng.randbytes(200) + b"x" * 100)
                at = base + rng.randrange(30 * DAY_MS)
                batch.put(b"\x03local\x00" + at.to_bytes(8, "big") + message, b"w" * 12)
                batch.put(b"\x04c/" + message, b"r" * 28)
            batch.put(b"\x01counters", rng.randbytes(40))
            db.write(batch, WriteOptions())
            if done % tenth == 0:
                now, now_cpu = time.perf_counter(), time.thread_time()
                tenths.append(now - mark)
                tenths_cpu.append(now_cpu - mark_cpu)
                mark, mark_cpu = now, now_cpu
        wall = time.perf_counter() - start_wall
        background = (time.process_time() - start_cpu) - (time.thread_time() - start_thread)
        found = re.search(r"Cumulative compaction: ([\d.]+) GB write",
                          db.property_value("rocksdb.stats") or "")
        statistics = options.get_statistics() or ""
    finally:
        db.close()
    probes = _count(statistics, "rocksdb.bloom.filter.useful")
    positives = _count(statistics, "rocksdb.bloom.filter.full.positive")
    return Fill(wall, background, float(found.group(1)) if found else 0.0,
                tenths[0], tenths[-1], tenths_cpu[0], tenths_cpu[-1],
                probes + positives,
                positives - _count(statistics, "rocksdb.bloom.filter.full.true.positive"),
                _count(statistics, "rocksdb.block.cache.data.miss"))


def _count(statistics: str, name: str) -> int:
    """One ticker of RocksDB's statistics dump (``name COUNT : n``)."""
    found = re.search(rf"^{re.escape(name)} COUNT : (\d+)", statistics, re.MULTILINE)
    return int(found.group(1)) if found else 0


def _run(trigger: int, bits: int, commands: int, scratch: Path) -> list[Fill]:
    paths = [scratch / f"l0-{trigger}-bits-{bits}-{n}" for n in range(2)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        fills = list(pool.map(_fill, [str(p) for p in paths], [trigger] * 2, [bits] * 2,
                              [commands] * 2))
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    return fills


def main() -> None:
    from nereus.state.store_options import BLOOM_BITS_PER_KEY, L0_COMPACTION_TRIGGER

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=2_500_000, help="per database")
    parser.add_argument("--triggers", type=_counts,
                        default=f"{BASELINE},8,{L0_COMPACTION_TRIGGER}")
    parser.add_argument("--bloom-bits", type=_counts, default=None,
                        help=f"compare these bits per key (and {BASELINE_BITS}) instead of "
                        "triggers, e.g. 10,16")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # a variant: (its name in the report, level-0 trigger, bloom bits per key)
    variants: list[tuple[str, int, int]]
    if args.bloom_bits:
        bits = sorted({BASELINE_BITS, *args.bloom_bits})
        variants = [(f"bits-{b}", L0_COMPACTION_TRIGGER, b) for b in bits]
        baseline, axis = f"bits-{BASELINE_BITS}", (
            f"bloom bits per key at level-0 trigger {L0_COMPACTION_TRIGGER} (ratio to "
            f"{BASELINE_BITS} bits); shard databases use {BLOOM_BITS_PER_KEY}")
    else:
        triggers = sorted({BASELINE, *args.triggers})
        variants = [(str(t), t, BLOOM_BITS_PER_KEY) for t in triggers]
        baseline, axis = str(BASELINE), (
            f"level-0 compaction trigger (ratio to trigger {BASELINE}); shard databases "
            f"use {L0_COMPACTION_TRIGGER}")
    results: dict[str, list[Fill]] = {}
    with tempfile.TemporaryDirectory(prefix="lsm-backlog-") as tmp:
        for name, trigger, bits_per_key in variants:
            if not args.json:
                print(f"filling two databases of {args.commands:,} commands, "
                      f"level-0 trigger {trigger}, {bits_per_key} bloom bits per key ...",
                      flush=True)
            results[name] = _run(trigger, bits_per_key, args.commands, Path(tmp))
    if args.json:
        print(json.dumps({name: [f._asdict() for f in fills]
                          for name, fills in results.items()}, indent=2))
        return
    base = _mean(results[baseline])
    print(f"\n{axis}; two databases of {args.commands:,} commands at once, mean of the two")
    for name, _trigger, _bits in variants:
        fill = _mean(results[name])
        print(f"  {name:>7}  fill {fill.wall_s:6.1f} s ({fill.wall_s / base.wall_s:.2f}x)"
              f"  background CPU {fill.background_cpu_s:5.1f} s "
              f"({fill.background_cpu_s / base.background_cpu_s:.2f}x)"
              f"  compactions wrote {fill.compaction_gb:5.2f} GB\n"
              f"           tenths {fill.first_tenth_s:.1f} / {fill.last_tenth_s:.1f} s: last "
              f"at {fill.first_tenth_s / fill.last_tenth_s:.2f}x the first's rate; writing "
              f"thread's CPU {fill.first_tenth_cpu_s:.1f} / {fill.last_tenth_cpu_s:.1f} s\n"
              f"           filter probes {fill.filter_probes:,.0f}, false positives "
              f"{fill.filter_false_positives:,.0f} "
              f"({fill.filter_false_positives / max(fill.filter_probes, 1):.2%}), data "
              f"blocks read {fill.data_blocks_read:,.0f}")


def _counts(text: str) -> list[int]:
    """``--triggers`` and ``--bloom-bits``: whole numbers >= 1, separated by commas."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give whole numbers of 1 or more separated by commas, e.g. 10,16")
    return counts


def _mean(fills: list[Fill]) -> Fill:
    return Fill(*(sum(values) / len(values) for values in zip(*fills, strict=True)))


if __name__ == "__main__":
    main()
