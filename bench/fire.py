"""Fire rate and lateness of the engine through the file destination.

Usage::

    .venv/bin/python bench/fire.py [--burst N] [--rate R --duration S] [--partitions P]
                                   [--only burst|steady] [--json] [--profile] [--keep]
                                   [--workers N]

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
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

import msgspec

from fire_profile import ThreadProfile, ThreadProfiles
from fire_scenarios import BurstFigures, SteadyFigures, burst, steady
from scratch import scratch_dir

REFERENCES = (
    "Apache Pulsar delayed delivery: tracker tick 1 s by default, may deliver early",
    "Apache RocketMQ delayed messages: 1 s tick (timer wheel), may deliver early",
    "Karafka scheduled messages: dispatcher runs every 15 s",
)


class FireReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything ``bench/fire.py`` reports; a scenario not run and ``profile`` without
    ``--profile`` are absent."""

    partitions: int
    workers: int | None  # None: the engine in the bench's process
    cpus: int | None
    burst: BurstFigures | None = None
    steady: SteadyFigures | None = None
    profile: list[ThreadProfile] | None = None
    references: list[str]
    command: str


# report ----------------------------------------------------------------------------------
def _render_burst(b: BurstFigures) -> list[str]:
    out = [f"burst   {b.messages:,} messages due at once "
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
    return [f"steady  {s.rate_per_s:,}/s for {s.duration_s} s ({s.messages:,} messages; {how})",
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
    if report.burst is not None:
        out.extend(_render_burst(report.burst))
    if report.steady is not None:
        out.extend(_render_steady(report.steady))
    out.append("reference (not measured):")
    out.extend(f"        {line}" for line in REFERENCES)
    for profile in report.profile or []:
        out.append(f"profile {profile.thread}: {profile.seconds} s sampled, "
                   f"{profile.busy_s} s busy, {profile.waiting_s} s waiting")
        out.append("        phases (inclusive): " + ", ".join(
            f"{k} {v} s" for k, v in profile.phases.items()))
        out.extend(f"        {hot.self_s:>7.3f} s  {hot.where}" for hot in profile.top_self)
    return "\n".join(out)


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
    args = parser.parse_args()
    if args.partitions is None:
        args.partitions = 1 if args.workers is None else max(2, args.workers)
    if args.profile and args.workers is not None:
        parser.error("--profile profiles the in-process engine; leave out --workers")
    if args.profile and importlib.util.find_spec("pyinstrument") is None:
        parser.error("--profile needs pyinstrument, which nereus does not depend on: "
                     "`.venv/bin/pip install pyinstrument`")
    profiles = ThreadProfiles() if args.profile else None
    burst_figures = steady_figures = None
    with scratch_dir("nereus-fire-", args.dir, keep=args.keep) as root:
        if profiles is not None:
            profiles.install()
        try:
            if args.only in (None, "burst"):
                burst_figures = burst(root, args)
            if args.only in (None, "steady"):
                steady_figures = steady(root, args)
        finally:
            if profiles is not None:
                profiles.uninstall()
    report = FireReport(partitions=args.partitions, workers=args.workers, cpus=os.cpu_count(),
                        burst=burst_figures, steady=steady_figures,
                        profile=None if profiles is None else profiles.report(args.profile_top),
                        references=list(REFERENCES),
                        command=" ".join([Path(sys.executable).name, *sys.argv]))
    print(json.dumps(msgspec.to_builtins(report), indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
