"""Ten million pending, a herd, idle engines and retention: issue 15's figures in one run.

Usage::

    .venv/bin/python bench/scale.py [--pending N] [--herd N] [--rate R]
        [--idle-shards 16 64 ...] [--skip fill herd idle retention] [--json] [--keep]

Each part runs the daemon (``nereus engine start``'s process, the default worker count)
on a fresh home whose route has 4 shards on the file log, and prints every figure beside
its target:

* **fill** (``scale_fill.py``): ``--pending`` messages (default 10,000,000; delays over 30
  days, 100-byte payloads): the apply rate of the first and the last tenth (target: the
  last within 20 % of the first), the engine's RSS at a tenth and at all (target: within
  10 %), disk bytes per pending message as the engine left them and after a full
  compaction (target <= 350 B), ``shard inspect`` wall time (target < 1 s) beside
  ``nereus --help``, a checkpoint's create and verify time, and restart-to-ready;
* **herd** (``scale_herd.py``): ``--herd`` messages (default 1,000,000) due in the same
  second on lane a while lane b carries ``--rate`` (500) a second: b's p99 lateness
  (target < 100 ms), a's drain rate against a solo burst of a tenth in the same run, zero
  early on both; and where b's time went by the engine's own histograms (decided after
  its actionAt; from its admission applied to its outcome applied);
* **idle** (``bench/idle.py``'s engine): CPU and RSS of an engine with ``--idle-shards``
  shards and nothing to do;
* **retention** (``scale_retention.py``): a lane with ``retention = "5s"``; once its
  messages are published and 5 s have passed, the store holds none of them and a replay
  from empty gives the live digest.

The test suite runs this at a small size (``tests/integration/test_benchmarks_run.py``) so it
never rots; the full run takes tens of minutes and is not in it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from idle import Figures as IdleFigures
from idle import measure as measure_idle
from scale_fill import FillFigures, fill
from scale_herd import HerdFigures, Stage, herd
from scale_retention import RetentionFigures, retention
from scratch import scratch_dir

PARTS = ("fill", "herd", "idle", "retention")
TARGET_LAST_VS_FIRST = 0.8
TARGET_RSS_GROWTH = 1.10
TARGET_DISK_BYTES = 350
TARGET_INSPECT_S = 1.0
TARGET_IDLE_CPU_16 = 1.0
TARGET_IDLE_RSS_64_MB = 300.0


class Report(msgspec.Struct, frozen=True):
    fill: FillFigures | None
    herd: HerdFigures | None
    idle: list[IdleFigures]
    retention: RetentionFigures | None
    seconds: float


def _mark(met: bool) -> str:
    return "MET" if met else "MISSED"


def _memory_line(tenth: dict[str, float], full: dict[str, float]) -> str:
    """Where the RSS went between a tenth and all: the engine's memory gauges, summed."""
    def both(name: str) -> str:
        return f"{tenth.get(name, '?')} / {full.get(name, '?')} MB"

    return (f"    of which, at a tenth / at all: indexes and filters (outside the budget) "
            f"{both('store_table_readers')}; block cache {both('store_block_cache')} "
            f"(memtables {both('store_memtable')}) of a {full.get('store_memory_budget', '?')} "
            f"MB budget")


def _render_fill(f: FillFigures) -> list[str]:
    return [
        f"fill: {f.pending:,} pending on {f.partitions} shards, {f.workers} worker(s), "
        f"{f.fill_s} s",
        f"  apply, first tenth {f.apply_first_tenth_per_s:,}/s, last tenth "
        f"{f.apply_last_tenth_per_s:,}/s: {f.last_vs_first:.2f}x "
        f"(target >= {TARGET_LAST_VS_FIRST}) {_mark(f.last_vs_first >= TARGET_LAST_VS_FIRST)}",
        f"  engine CPU per command applied: first tenth {f.cpu_us_first_tenth} us, last "
        f"tenth {f.cpu_us_last_tenth} us",
        f"  RSS at a tenth {f.rss_tenth_mb} MB, at all {f.rss_full_mb} MB: "
        f"{f.rss_full_vs_tenth:.2f}x (target <= {TARGET_RSS_GROWTH}) "
        f"{_mark(f.rss_full_vs_tenth <= TARGET_RSS_GROWTH)}",
        _memory_line(f.memory_tenth_mb, f.memory_full_mb),
        f"  SCHEDULED counted by the engine: {f.scheduled_counted:,}",
        f"  disk per pending message: {f.disk_bytes_per_pending} B as left, "
        f"{f.disk_bytes_per_pending_compacted} B compacted (target <= {TARGET_DISK_BYTES}) "
        f"{_mark(f.disk_bytes_per_pending_compacted <= TARGET_DISK_BYTES)}",
        f"  shard inspect {f.inspect_s * 1000:.0f} ms (target < {TARGET_INSPECT_S * 1000:.0f} "
        f"ms) {_mark(f.inspect_s < TARGET_INSPECT_S)}; nereus --help {f.help_s * 1000:.0f} ms; "
        f"ratio {f.inspect_vs_help}",
        f"  checkpoint of one shard ({f.checkpoint_bytes / 1e6:.0f} MB): create "
        f"{f.checkpoint_create_s} s, verify {f.checkpoint_verify_s} s",
        f"  restart to ready (open, replay the tail, barrier): {f.restart_to_ready_s} s",
    ]


def _stages_line(h: HerdFigures) -> str:
    """Where b's time went, by the engine's histograms (``HerdFigures.b_stages``)."""
    def said(stage: Stage) -> str:
        if stage.mean_ms is None:
            return "none observed"
        under = ("beyond the last bucket" if stage.p99_under_ms is None
                 else f"under {stage.p99_under_ms:g} ms")
        return f"mean {stage.mean_ms} ms, p99 {under}"

    stages = h.b_stages
    return (f"  b in the engine: decided after actionAt {said(stages.decided_after_action_at)} "
            f"by Trusted UTC's earliest, which trails the wall clock by its error bound "
            f"({h.clock_error_ms} ms, [engine] max_clock_error_ms: in every lateness above); "
            f"admission applied to outcome applied {said(stages.admission_to_outcome)}")


def _render_herd(h: HerdFigures) -> list[str]:
    return [
        f"herd: {h.herd:,} due in one second on lane a, lane b at {h.b_rate_per_s}/s "
        f"(applied before due: {h.applied_before_due})",
        f"  a drained in {h.a_drain_s} s: {h.a_rate_per_s:,}/s; solo burst of "
        f"{h.solo_messages:,}: {h.solo_rate_per_s:,}/s; ratio {h.a_vs_solo}",
        f"  b during the drain ({h.b_during_drain:,} messages): p50 {h.b_lateness_p50_ms} ms, "
        f"p99 {h.b_lateness_p99_ms} ms (target < {h.target_b_p99_ms}) {_mark(h.met)}, "
        f"max {h.b_lateness_max_ms} ms",
        f"  b p99 by tenth of the drain: {', '.join(str(ms) for ms in h.b_p99_by_tenth_ms)} "
        f"ms; Trusted UTC held behind the wall clock at the end: {h.held_back_ms} ms",
        _stages_line(h),
        f"  early: a {h.early_a}, b {h.early_b} (target 0) "
        f"{_mark(h.early_a == 0 and h.early_b == 0)}; duplicates {h.duplicates}",
    ]


def _render_idle(figures: list[IdleFigures]) -> list[str]:
    out = ["idle: nothing scheduled"]
    for f in figures:
        target = ""
        if f.shards == 16:
            target = (f" (target <= {TARGET_IDLE_CPU_16} %) "
                      f"{_mark(f.cpu_percent <= TARGET_IDLE_CPU_16)}")
        if f.shards == 64:
            target = (f" (RSS target < {TARGET_IDLE_RSS_64_MB:.0f} MB) "
                      f"{_mark(f.rss_mb < TARGET_IDLE_RSS_64_MB)}")
        out.append(f"  {f.shards} shards: {f.cpu_percent} % of a core, {f.rss_mb} MB{target}")
    return out


def _render_retention(r: RetentionFigures) -> list[str]:
    return [
        f"retention: lane with retention = \"{r.retention}\", {r.messages} messages",
        f"  published {r.published}; terminal messages left in the store after "
        f"{r.swept_after_s} s: {r.terminal_left} (target 0) {_mark(r.terminal_left == 0)}",
        f"  replay from empty gives the live digest: {r.replay_matches} "
        f"{_mark(r.replay_matches)}",
    ]


def render(report: Report) -> str:
    out = ["Nereus Delay at scale (route of 4 shards, file log, the daemon's defaults)"]
    if report.fill:
        out += _render_fill(report.fill)
    if report.herd:
        out += _render_herd(report.herd)
    if report.idle:
        out += _render_idle(report.idle)
    if report.retention:
        out += _render_retention(report.retention)
    out.append(f"whole run: {report.seconds:.0f} s")
    return "\n".join(out)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=10_000_000)
    parser.add_argument("--herd", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--idle-shards", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--retention-messages", type=int, default=200)
    parser.add_argument("--skip", nargs="*", choices=PARTS, default=[])
    parser.add_argument("--deadline", type=float, default=3_600.0,
                        help="seconds any one wait may take")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the homes go (default: the system temp directory)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    with scratch_dir("nereus-scale-", args.dir, keep=args.keep) as root:
        run = [part for part in PARTS if part not in args.skip]
        filled = fill(root, args.pending, _say, args.deadline) if "fill" in run else None
        herded = herd(root, args.herd, args.rate, args.deadline) if "herd" in run else None
        idle = ([measure_idle(root, shards, "engine", args.idle_seconds)
                 for shards in args.idle_shards] if "idle" in run else [])
        kept = (retention(root, args.retention_messages, args.deadline)
                if "retention" in run else None)
    report = Report(filled, herded, idle, kept, round(time.monotonic() - started, 1))
    document: Any = msgspec.to_builtins(report)
    print(json.dumps(document, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
