"""Fire rate and lateness of the engine through the file destination.

Usage::

    .venv/bin/python bench/fire.py [--burst N] [--rate R --duration S] [--partitions P]
                                   [--only burst|steady] [--json] [--profile] [--keep]
                                   [--workers N] [--level L] [--baseline-level B]
                                   [--rounds K]

What it does, each scenario in a fresh temp home with the engine running in-process
(``nereus.engine.process.home_engine.Engine`` with the daemon's default ``EngineSettings``):

1. **burst**: N SCHEDULE commands, all with the same ``deliver_at`` ``--lead-ms`` ahead,
   are queued to the shards' file logs (``nereus.client.queue``) while the engine applies
   them; the engine must have applied them all before that instant (checked). From
   ``deliver_at`` the bench polls the lane publisher's counter until N are published and
   reports publishes/s, in total and per shard (a shard's lines over the span from
   ``deliver_at`` to its last ``published_at``). It also reports the engine's **CPU µs per
   published message** (the CPU time of the engine's threads, not the bench's own, from
   ``deliver_at`` until every outcome is applied: claims, admissions, publishes and
   outcomes), which compares across machines better than publishes/s, and a **raw
   baseline** measured in the same run (``fire_raw``): the run's outbox lines, in the
   batches the destination wrote them, written and fsynced again without the engine, and
   the ratio of the engine's rate to it.
2. **steady**: a feeder *process* (so it does not share the engine's GIL) queues R
   messages a second for S seconds in 10 ms ticks, each ``deliver_at`` = send time +
   ``--steady-lead-ms``; ``--steady-mode prequeue`` instead queues them all up front with
   ``deliver_at`` staggered at 1/R s. Lateness is ``published_at - deliver_at`` of every
   outbox line (ISO-8601 ms, so 1 ms resolution): p50, p99, max, and how many were early.

The engine treats a message as due when Trusted UTC ``earliest`` (wall clock minus
``max_clock_error_ms``, 20 ms by default) reaches ``deliver_at``: that bound is a floor
under every lateness figure, reported with them. ``--profile`` runs every shard-loop and
publisher thread under pyinstrument (a per-thread profiler started inside the thread, set
up here; product code is unchanged) and prints the hottest frames. Everything is removed
afterwards unless ``--keep``.

``--workers N`` runs the daemon instead (``nereus engine start --workers N``; 1 is the
single-process daemon) and watches it from outside (``fire_engines``): published = lines
in the outbox, states over the admin socket, CPU of the front door and its workers from
``/proc``. Its route then has ``max(2, N)`` partitions unless ``--partitions`` says, so the
load spreads over at least two shards; compare ``--workers 1`` and ``--workers 2`` with
the same ``--partitions``. ``--profile`` needs the in-process engine. The parts:
``fire_scenarios`` (the two scenarios, on ``inprocess_engine`` or the daemon, shared with
``bench/brokers.py``), ``fire_engines`` (what they watch), ``fire_raw`` (the raw baseline)
and ``fire_profile`` (the threads' profiler); this module prints the report.

**The old path as the baseline, in the same run**: each scenario runs in a home at feature
level ``--level`` (default: this build's, 2: a turn's admissions and outcomes as one
PUBLISH_BATCH record) and in one at ``--baseline-level`` (default 1: a record each, as
0.1.0 writes them; 0 skips it), ``--rounds`` times, alternating which goes first. The
report gives both and, for the burst, the median of the rounds' ratios (CPU per published
message, publishes/s per shard), for the steady rate both p99s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

import msgspec

from fire_profile import ThreadProfile, ThreadProfiles
from fire_scenarios import BurstFigures, SteadyFigures, burst, steady
from nereus.features import SUPPORTED_LEVEL
from scratch import scratch_dir

REFERENCES = (
    "Apache Pulsar delayed delivery: tracker tick 1 s by default, may deliver early",
    "Apache RocketMQ delayed messages: 1 s tick (timer wheel), may deliver early",
    "Karafka scheduled messages: dispatcher runs every 15 s",
)


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """``--level`` against ``--baseline-level``, the median over the rounds of each round's
    ratio (new / baseline; a round ran both, one after the other)."""

    rounds: int  # bursts compared (the steady rounds: ``steady_p99_ms``)
    cpu_us_per_publish: list[tuple[float, float]]  # (new, baseline) per round
    cpu_ratio_median: float
    rate_per_shard: list[tuple[int, int]]  # (new, baseline) per round, the slowest shard
    rate_ratio_median: float
    steady_p99_ms: list[tuple[int, int]]  # (new, baseline) per round; empty: not run


class FireReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything ``bench/fire.py`` reports; a scenario not run, a baseline not asked for
    and ``profile`` without ``--profile`` are absent. ``burst`` and ``steady`` are the last
    round's at ``level``, ``*_baseline`` at ``baseline_level``."""

    partitions: int
    workers: int | None  # None: the engine in the bench's process
    cpus: int | None
    level: int
    baseline_level: int | None = None
    burst: BurstFigures | None = None
    burst_baseline: BurstFigures | None = None
    comparison: Comparison | None = None
    steady: SteadyFigures | None = None
    steady_baseline: SteadyFigures | None = None
    profile: list[ThreadProfile] | None = None
    references: list[str]
    command: str


# report ----------------------------------------------------------------------------------
def _render_burst(b: BurstFigures) -> list[str]:
    out = [f"burst   at feature level {b.feature_level}: {b.messages:,} messages due at once "
           f"(queued in {b.queue_s} s, applied "
           f"{'before' if b.applied_before_due else 'NOT before'} due)",
           f"        first publish {b.first_publish_after_due_ms} ms after due; all "
           f"{b.outbox_lines:,} in {b.all_published_after_due_s} s = "
           f"{b.rate_total_per_s:,}/s total; every outcome applied after "
           f"{b.all_recorded_after_due_s} s; engine CPU {b.cpu_per_wall} s/s",
           f"        engine CPU {b.cpu_us_per_publish} us per published message "
           f"({b.engine_cpu_s} s from due until every outcome was applied)",
           f"        raw baseline (the same lines, {b.raw.batches:,} batches of "
           f"{b.raw.mean_batch} on average, written and fsynced without the engine): "
           f"{b.raw.rate_per_s:,}/s; engine / raw = {b.raw_ratio}"]
    for shard, s in b.per_shard.items():
        out.append(f"        {shard}: {s.published:,} in {s.span_ms} ms = {s.rate_per_s:,}/s")
    out.append(f"        target >= {b.target_per_shard:,} publishes/s per shard: "
               f"{'MET' if b.met else 'MISSED'}  (duplicates {b.duplicates}, states "
               f"{b.states})")
    return out


def _render_steady(s: SteadyFigures) -> list[str]:
    how = (f"feeder process, deliver_at = send + {s.lead_ms} ms"
           if s.mode == "feeder" else "pre-queued, deliver_at staggered")
    lat = s.lateness_ms
    return [f"steady  at feature level {s.feature_level}: {s.rate_per_s:,}/s for "
            f"{s.duration_s} s ({s.messages:,} messages; {how})",
            f"        lateness p50 {lat.p50} ms  p90 {lat.p90} ms  p99 {lat.p99} "
            f"ms  max {lat.max} ms  mean {lat.mean} ms; early {s.early}; "
            f"floor {s.clock_error_floor_ms} ms (Trusted UTC error bound); engine "
            f"process CPU {s.engine_cpu_per_wall} s/s",
            f"        target p99 < {s.target_p99_ms} ms: "
            f"{'MET' if s.met else 'MISSED'}  (duplicates {s.duplicates}, states "
            f"{s.states})"]


def render(report: FireReport) -> str:
    engine = "in-process engine" if report.workers is None else \
        f"daemon with {report.workers} worker process(es)"
    out = [f"Nereus Delay fire bench: {engine}, file destination, "
           f"{report.partitions} shard(s), {report.cpus} CPU(s)"]
    for burst_figures in (report.burst_baseline, report.burst):
        if burst_figures is not None:
            out.extend(_render_burst(burst_figures))
    if report.comparison is not None:
        c = report.comparison
        out.append(f"level {report.level} / level {report.baseline_level} over {c.rounds} "
                   f"round(s): CPU per published message {c.cpu_ratio_median}x (median; "
                   f"{', '.join(f'{n} vs {b} us' for n, b in c.cpu_us_per_publish)}), "
                   f"publishes/s per shard {c.rate_ratio_median}x "
                   f"({', '.join(f'{n:,} vs {b:,}' for n, b in c.rate_per_shard)})")
        if c.steady_p99_ms:
            out.append(f"steady p99 level {report.level} vs {report.baseline_level}: "
                       + ", ".join(f"{n} vs {b} ms" for n, b in c.steady_p99_ms))
    for steady_figures in (report.steady_baseline, report.steady):
        if steady_figures is not None:
            out.extend(_render_steady(steady_figures))
    out.append("reference (not measured):")
    out.extend(f"        {line}" for line in REFERENCES)
    for profile in report.profile or []:
        out.append(f"profile {profile.thread}: {profile.seconds} s sampled, "
                   f"{profile.busy_s} s busy, {profile.waiting_s} s waiting")
        out.append("        phases (inclusive): " + ", ".join(
            f"{k} {v} s" for k, v in profile.phases.items()))
        out.extend(f"        {hot.self_s:>7.3f} s  {hot.where}" for hot in profile.top_self)
    return "\n".join(out)


class Runs(msgspec.Struct, frozen=True, kw_only=True):
    """What ``_runs`` measured (``FireReport``'s fields of the same names)."""

    burst: BurstFigures | None = None
    burst_baseline: BurstFigures | None = None
    comparison: Comparison | None = None
    steady: SteadyFigures | None = None
    steady_baseline: SteadyFigures | None = None


def _runs(root: Path, args: argparse.Namespace) -> Runs:
    """Each scenario asked for at ``--level`` and ``--baseline-level``, ``--rounds`` times,
    alternating which level goes first; the last round's figures and the comparison."""
    levels = [args.level] + ([args.baseline_level] if args.baseline_level else [])
    bursts: list[dict[int, BurstFigures]] = []
    steadies: list[dict[int, SteadyFigures]] = []
    for round_no in range(args.rounds):
        order = levels if round_no % 2 else levels[::-1]  # the baseline first in round 1
        if args.only in (None, "burst"):
            bursts.append({level: burst(root, args, level) for level in order})
        if args.only in (None, "steady"):
            steadies.append({level: steady(root, args, level) for level in order})
    base = args.baseline_level
    last = bursts[-1] if bursts else {}
    calm = steadies[-1] if steadies else {}
    p99s = [(s[args.level].lateness_ms.p99, s[base].lateness_ms.p99) for s in steadies] \
        if base else []
    return Runs(
        burst=last.get(args.level), burst_baseline=last.get(base) if base else None,
        comparison=_compare([(b[args.level], b[base]) for b in bursts], p99s)
        if base and (bursts or steadies) else None,
        steady=calm.get(args.level), steady_baseline=calm.get(base) if base else None)


def _median_ratio(pairs: list[tuple[float, float]] | list[tuple[int, int]]) -> float:
    """The median of new / baseline over the rounds (0.0: no round)."""
    return round(statistics.median(n / b for n, b in pairs), 3) if pairs else 0.0


def _compare(pairs: list[tuple[BurstFigures, BurstFigures]],
             p99s: list[tuple[int, int]]) -> Comparison:
    cpu = [(new.cpu_us_per_publish, old.cpu_us_per_publish) for new, old in pairs]
    rate = [(new.rate_per_shard_min, old.rate_per_shard_min) for new, old in pairs]
    return Comparison(
        rounds=len(pairs), cpu_us_per_publish=cpu,
        cpu_ratio_median=_median_ratio(cpu),
        rate_per_shard=rate,
        rate_ratio_median=_median_ratio(rate),
        steady_p99_ms=p99s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=20_000, help="messages due at once")
    parser.add_argument("--rate", type=int, default=2_000, help="steady messages per second")
    parser.add_argument("--duration", type=float, default=10.0, help="steady seconds")
    parser.add_argument("--partitions", type=int, default=None,
                        help="shards of the route (default 1; max(2, N) with --workers N)")
    parser.add_argument("--workers", type=int, default=None,
                        help="run the daemon with N worker processes instead of in-process")
    parser.add_argument("--lead-ms", type=int, default=4_000,
                        help="burst: deliver_at this far after queueing starts")
    parser.add_argument("--steady-lead-ms", type=int, default=200,
                        help="steady feeder: deliver_at = send time + this")
    parser.add_argument("--steady-mode", choices=("feeder", "prequeue"), default="feeder")
    parser.add_argument("--only", choices=("burst", "steady"), default=None)
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds per wait")
    parser.add_argument("--dir", type=Path, default=None, help="where the temp homes go")
    parser.add_argument("--keep", action="store_true", help="keep the temp homes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--profile", action="store_true",
                        help="profile the engine threads with pyinstrument")
    parser.add_argument("--profile-top", type=int, default=12)
    parser.add_argument("--level", type=int, default=SUPPORTED_LEVEL,
                        help="the homes' feature level (default: this build's)")
    parser.add_argument("--baseline-level", type=int, default=1,
                        help="the baseline's feature level, run beside it (0: none)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="level and baseline runs, alternating which goes first")
    args = parser.parse_args()
    if args.partitions is None:
        args.partitions = 1 if args.workers is None else max(2, args.workers)
    if args.profile and args.workers is not None:
        parser.error("--profile profiles the in-process engine; leave out --workers")
    if args.profile and importlib.util.find_spec("pyinstrument") is None:
        parser.error("--profile needs pyinstrument, which nereus does not depend on: "
                     "`.venv/bin/pip install pyinstrument`")
    profiles = ThreadProfiles() if args.profile else None
    with scratch_dir("nereus-fire-", args.dir, keep=args.keep) as root:
        if profiles is not None:
            profiles.install()
        try:
            runs = _runs(root, args)
        finally:
            if profiles is not None:
                profiles.uninstall()
    report = FireReport(partitions=args.partitions, workers=args.workers, cpus=os.cpu_count(),
                        level=args.level, baseline_level=args.baseline_level or None,
                        **msgspec.structs.asdict(runs),
                        profile=None if profiles is None else profiles.report(args.profile_top),
                        references=list(REFERENCES),
                        command=" ".join([Path(sys.executable).name, *sys.argv]))
    print(json.dumps(msgspec.to_builtins(report), indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
