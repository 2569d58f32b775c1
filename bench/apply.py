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
The parts: ``apply_log`` builds the log (step 1), ``apply_rounds`` runs the rounds (2-3),
``apply_stages`` times the stages (4), ``apply_report`` makes the report (5).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apply_log import build_log
from apply_report import ApplyReport, assemble, print_report
from apply_rounds import run_round
from apply_stages import decompose, profile_runner
from scratch import scratch_dir


def measure(args: argparse.Namespace, root: Path) -> ApplyReport:
    n, batch = args.records, args.batch
    log_dir = root / "log"
    # 1. the log ---------------------------------------------------------------------------
    log = build_log(log_dir, n, seed=args.seed, payload_bytes=args.payload_bytes,
                    append_group=args.append_group)
    # 2-3. ours and the raw baseline, alternating round by round -----------------------
    rounds = [run_round(root, log_dir, batch, n, index) for index in range(args.rounds)]
    # 4. decomposition ------------------------------------------------------------------
    stages = decompose(root, log_dir, n, batch)
    report = assemble(batch=batch, append_group=args.append_group, log=log, rounds=rounds,
                      stages=stages)
    if args.profile:
        profile = profile_runner(root / "db-profile", log_dir, batch, args.profile_top)
        report = msgspec.structs.replace(report, profile=profile)
    return report


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

    with scratch_dir("nereus-bench-apply-", args.dir, keep=args.keep) as root:
        report = measure(args, root)
    if args.json:
        print(json.dumps(msgspec.to_builtins(report), indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
