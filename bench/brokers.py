"""Delayed delivery through real brokers: Nereus against Pulsar's own, and Kafka -> Kafka.

Usage::

    .venv/bin/python bench/brokers.py [--messages N] [--min-delay-ms A] [--max-delay-ms B]
        [--seed S] [--route-log file|pulsar] [--no-handoff] [--kafka-messages M]
        [--kafka-partitions P] [--only pulsar|kafka] [--deadline S] [--json] [--keep]

The brokers are the ones ``scripts/services`` runs (Kafka 4.4 KRaft, Pulsar 4.2.4
standalone with strict delayed delivery and a 100 ms tick). A broker that is not running is
started, and only the brokers started here are stopped at the end.

1. **pulsar**: the same N messages with the same seeded random delays (A..B ms after a
   common start ``t0``) are delivered three ways, each to a fresh topic with a Shared
   subscription made before anything is sent:

   a. *nereus*: an in-process engine (route on the embedded file log, or ``--route-log
      pulsar``; lane destination Pulsar, plain publish) gets N SCHEDULE commands queued
      before ``t0`` and publishes each when it is due;
   b. *nereus handoff* (unless ``--no-handoff``): the same lane with ``handoff =
      "deliver_at"``: the engine hands each message to Pulsar ``lead_ms`` (1 s) early with
      ``deliver_at`` and Pulsar holds it;
   c. *pulsar direct*: the bench's own producer sends all N at ``t0`` with ``deliver_at``
      and Pulsar's delayed delivery does the rest.

   A consumer in a separate process (so it shares no GIL with the engine) records when it
   receives each message. Reported: how fast the N were accepted (SCHEDULE commands queued
   per second, or producer sends per second), messages received per second over the span,
   lateness = receive time - deliverAt (p50, p99, max), and how many arrived BEFORE their
   deliverAt (Nereus must show 0; Pulsar's own may not), missing and duplicates.

2. **kafka**: route and lane on Kafka. M SCHEDULE commands all due at one instant are
   queued to the Command Topic (the engine must apply them before that instant, checked);
   the destination topic is made with ``message.timestamp.type = LogAppendTime`` so each
   record's timestamp is the broker's receipt. Publishes per second per shard = a shard's
   records / (its last receipt - its first receipt); the delay from due to the first and
   to the last receipt is reported too.

Everything runs on one host, so every clock is the same clock. Temp homes and topics are
removed afterwards unless ``--keep``. The parts: ``brokers_pulsar`` and ``brokers_kafka``
(the scenarios, on ``inprocess_engine``, shared with ``bench/fire.py``); this module
runs the brokers and prints the report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec

from brokers_kafka import KafkaSection, kafka_to_kafka
from brokers_pulsar import Delivery, NereusDelivery, PulsarSection, run_pulsar
from fire_scenarios import TARGET_P99_MS, TARGET_RATE_PER_SHARD
from scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ROOT / "scripts" / "services"

TARGET_EARLY_NEREUS = 0
NOTES = (
    "lateness is consumer-observed: it includes the destination's publish, the broker and the "
    "consumer's receive, and the engine's Trusted UTC floor (max_clock_error_ms, 20 ms)",
    "Pulsar here runs with strict deliver-at (never before the time) and a 100 ms tick; with "
    "the default non-strict tracker Pulsar may deliver up to one tick early",
    "Kafka -> Kafka per-shard rate is measured at the destination broker (LogAppendTime)",
)


class Targets(msgspec.Struct, frozen=True):
    """bench/fire.py's lateness and publish-rate targets (there at the file destination)."""

    nereus_early: int
    p99_ms: int
    kafka_rate_per_shard: int


class BrokersReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Everything ``bench/brokers.py`` reports; a scenario not run is absent."""

    cpus: int | None
    command: str
    pulsar: PulsarSection | None = None
    kafka: KafkaSection | None = None
    targets: Targets
    notes: list[str]


# the brokers ------------------------------------------------------------------------------
def services(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def services_env() -> dict[str, str]:
    found = {}
    for line in services("env", timeout=30).stdout.splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep:
            found[name.strip()] = value.strip()
    return found


@contextlib.contextmanager
def brokers(names: list[str]) -> Iterator[dict[str, str]]:
    """The brokers running (started if they were not); stops only those it started."""
    started = []
    try:
        for name in names:
            if services("status", name, timeout=30).returncode == 0:
                continue
            print(f"starting {name} (scripts/services up {name}) ...", file=sys.stderr)
            up = services("up", name)
            if up.returncode != 0:
                raise SystemExit(f"scripts/services up {name} failed:\n{up.stderr[-2_000:]}")
            started.append(name)
        yield services_env()
    finally:
        for name in reversed(started):
            print(f"stopping {name} (started by this bench) ...", file=sys.stderr)
            services("down", name, timeout=120)


# report ----------------------------------------------------------------------------------
def render_delivery(name: str, r: Delivery) -> list[str]:
    lat = r.lateness_ms
    accepted = (f"accepted {r.messages:,} in {r.accepted_s} s = "
                f"{r.accepted_per_s:,}/s" if r.accepted_per_s else "")
    lead_ms = r.lead_ms if isinstance(r, NereusDelivery) else 0
    lead = f"; handed over {lead_ms} ms early" if lead_ms else ""
    return [
        f"  {name:<15} received {r.received:,}/{r.messages:,} "
        f"({r.received_per_s or 0:,}/s over the span); {accepted}{lead}",
        f"  {'':<15} lateness p50 {lat.p50} ms  p99 {lat.p99} ms  max {lat.max} ms  "
        f"min {lat.min} ms; BEFORE deliverAt {r.early} (by up to {r.early_max_ms} "
        f"ms); missing {r.missing}, duplicates {r.duplicates}",
    ]


def render_pulsar(p: PulsarSection) -> list[str]:
    out = [f"pulsar  {p.messages:,} messages, delays {p.delay_ms[0]}-"
           f"{p.delay_ms[1]} ms (seed {p.seed}), Shared subscription; Nereus "
           f"route on the {p.route_log} log, {p.partitions} shard(s)"]
    out.extend(render_delivery("nereus publish", p.nereus))
    if p.nereus_handoff is not None:
        out.extend(render_delivery("nereus handoff", p.nereus_handoff))
    out.extend(render_delivery("pulsar direct", p.direct))
    n = p.nereus
    out.append(f"  target: Nereus (publish) never before deliverAt: "
               f"{'MET' if n.early == TARGET_EARLY_NEREUS else 'MISSED'} "
               f"({n.early}); p99 < {TARGET_P99_MS} ms: "
               f"{'MET' if n.lateness_ms.p99 < TARGET_P99_MS else 'MISSED'}; "
               f"states {n.states}")
    return out


def render_kafka(k: KafkaSection) -> list[str]:
    out = [f"kafka   {k.messages:,} messages due at once, route and lane on Kafka, "
           f"{k.partitions} shard(s); queued {k.queued_per_s:,}/s, applied "
           f"{'before' if k.applied_before_due else 'NOT before'} due "
           f"({k.applied_ms_before_due} ms to spare)"]
    for shard, s in k.per_shard.items():
        out.append(f"  {shard}: {s.published:,} receipts, first {s.first_after_due_ms}"
                   f" ms / last {s.last_after_due_ms} ms after due; first->last "
                   f"{s.span_ms} ms = {s.rate_per_s:,}/s (from due "
                   f"{s.rate_from_due_per_s:,}/s)")
    out.append(f"  target >= {k.target_per_shard:,} publishes/s per shard: "
               f"{'MET' if k.met else 'MISSED'} (records {k.records_on_topic:,}, "
               f"duplicates {k.duplicates}, states {k.states})")
    return out


def render(report: BrokersReport) -> str:
    out = [f"Nereus Delay broker bench: {report.cpus} CPU(s); {report.command}"]
    if report.pulsar is not None:
        out.extend(render_pulsar(report.pulsar))
    if report.kafka is not None:
        out.extend(render_kafka(report.kafka))
    out.append("notes:")
    out.extend(f"  {line}" for line in NOTES)
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000, help="pulsar: messages")
    parser.add_argument("--min-delay-ms", type=int, default=1_000)
    parser.add_argument("--max-delay-ms", type=int, default=6_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--partitions", type=int, default=1, help="pulsar: Nereus shards")
    parser.add_argument("--route-log", choices=("file", "pulsar"), default="file")
    parser.add_argument("--no-handoff", action="store_true",
                        help="skip the Nereus run with handoff = deliver_at")
    parser.add_argument("--kafka-messages", type=int, default=20_000)
    parser.add_argument("--kafka-partitions", type=int, default=1, help="kafka: shards")
    parser.add_argument("--kafka-lead-ms", type=int, default=8_000,
                        help="kafka: due this long after queueing starts")
    parser.add_argument("--only", choices=("pulsar", "kafka"), default=None)
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds per wait")
    parser.add_argument("--dir", type=Path, default=None, help="where the temp homes go")
    parser.add_argument("--keep", action="store_true", help="keep temp homes and topics")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args()
    needed = [n for n in ("pulsar", "kafka") if args.only in (None, n)]
    pulsar = kafka = None
    with (scratch_dir("nereus-brokers-", args.dir, keep=args.keep) as root,
          brokers(needed) as env):
        if "pulsar" in needed:
            pulsar = run_pulsar(root, env, args)
        if "kafka" in needed:
            kafka = kafka_to_kafka(root, env, args)
    report = BrokersReport(
        cpus=os.cpu_count(), command=" ".join([Path(sys.executable).name, *sys.argv]),
        pulsar=pulsar, kafka=kafka,
        targets=Targets(nereus_early=TARGET_EARLY_NEREUS, p99_ms=TARGET_P99_MS,
                        kafka_rate_per_shard=TARGET_RATE_PER_SHARD),
        notes=list(NOTES))
    print(json.dumps(msgspec.to_builtins(report), indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
