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
removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nereus.adapters.shardlog.factory import open_shard_log
from nereus.adapters.shardlog.protocol import ShardLog
from nereus.client import RouteRef, prepare_schedule, queue
from nereus.config import Config, parse_config
from nereus.engine.engine import Engine, EngineSettings
from nereus.shard import ShardId, partition_for

if TYPE_CHECKING:
    from confluent_kafka import Message

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ROOT / "scripts" / "services"
PROPERTY_ID = "nereus-delay-message-id"  # the Pulsar destination sets it; the bench's own too
PAYLOAD = b'{"order": 1234567, "action": "remind", "note": "' + b"x" * 48 + b'"}'
START_MARGIN_MS = 1_500  # t0 = now + this: every SCHEDULE is queued and applied before t0
SETTLE_S = 1.0  # the consumer keeps listening this long after the last expected message

TARGET_EARLY_NEREUS = 0
TARGET_P99_MS = 100  # bench/fire.py's lateness target (there at the file destination)
TARGET_RATE_PER_SHARD = 5_000  # bench/fire.py's publish-rate target (file destination)
NOTES = (
    "lateness is consumer-observed: it includes the destination's publish, the broker and the "
    "consumer's receive, and the engine's Trusted UTC floor (max_clock_error_ms, 20 ms)",
    "Pulsar here runs with strict deliver-at (never before the time) and a 100 ms tick; with "
    "the default non-strict tracker Pulsar may deliver up to one tick early",
    "Kafka -> Kafka per-shard rate is measured at the destination broker (LogAppendTime)",
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        return 0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


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


# the consumer process ----------------------------------------------------------------------
def consume(service_url: str, topic: str, expected: int, deadline_s: float, out_path: str,
            ready: Any) -> None:
    """(child process) Receive from a Shared subscription; write {id: [receive ms, ...]}."""
    import pulsar

    client = pulsar.Client(service_url, logger=pulsar.FileLogger(pulsar.LoggerLevel.Warn,
                                                                  os.devnull))
    consumer = client.subscribe(topic, "bench", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=2_000)
    ready.set()
    seen: dict[str, list[int]] = {}
    end = time.monotonic() + deadline_s
    settle_until = None
    try:
        while time.monotonic() < end:
            if settle_until is None and len(seen) >= expected:
                settle_until = time.monotonic() + SETTLE_S
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            try:
                message = consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            received = now_ms()
            seen.setdefault(message.properties().get(PROPERTY_ID, "?"), []).append(received)
            consumer.acknowledge(message)
    finally:
        Path(out_path).write_text(json.dumps(seen))
        client.close()


class Consumer:
    """A consumer process on a fresh Shared subscription; ``result()`` joins it."""

    def __init__(self, service_url: str, topic: str, expected: int, deadline_s: float,
                 work: Path) -> None:
        context = multiprocessing.get_context("spawn")
        self.out_path = work / f"seen-{uuid.uuid4().hex[:8]}.json"
        self.deadline_s = deadline_s
        ready = context.Event()
        self.proc = context.Process(target=consume, args=(
            service_url, topic, expected, deadline_s, str(self.out_path), ready))
        self.proc.start()
        if not ready.wait(60):
            self.proc.kill()
            raise SystemExit(f"the consumer on {topic} did not subscribe within 60 s")

    def result(self) -> dict[str, list[int]]:
        self.proc.join(self.deadline_s + 30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
        if not self.out_path.exists():
            raise SystemExit(f"the consumer exited with {self.proc.exitcode} and no result")
        seen: dict[str, list[int]] = json.loads(self.out_path.read_text())
        return seen


def delivery_report(deliver: dict[str, int], seen: dict[str, list[int]],
                    accepted_s: float) -> dict[str, Any]:
    """Lateness (first receive - deliverAt), early, missing and duplicate counts."""
    firsts = {m: min(t) for m, t in seen.items() if m in deliver}
    lateness = sorted(firsts[m] - deliver[m] for m in firsts)
    early = [value for value in lateness if value < 0]
    span_ms = max(firsts.values()) - min(firsts.values()) if firsts else 0
    return {
        "messages": len(deliver),
        "received": len(firsts),
        "missing": len(set(deliver) - set(firsts)),
        "duplicates": sum(len(t) - 1 for m, t in seen.items() if m in deliver),
        "strays": len(set(seen) - set(deliver)),
        "accepted_per_s": round(len(deliver) / accepted_s) if accepted_s > 0 else None,
        "accepted_s": round(accepted_s, 3),
        "received_per_s": round(len(firsts) / span_ms * 1000) if span_ms else None,
        "lateness_ms": {"p50": percentile(lateness, 0.50), "p99": percentile(lateness, 0.99),
                        "max": lateness[-1] if lateness else 0,
                        "min": lateness[0] if lateness else 0},
        "early": len(early),
        "early_max_ms": -min(early) if early else 0,
    }


# scenario 1: delayed delivery to Pulsar -----------------------------------------------------
def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(id, delay ms after t0): the same for every variant."""
    rng = random.Random(args.seed)
    return [(f"m{n:05d}", rng.randint(args.min_delay_ms, args.max_delay_ms))
            for n in range(args.messages)]


def engine_settings(config: Config) -> EngineSettings:
    return EngineSettings.from_config(config.engine)


def message_states(engine: Engine) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for loop in engine.shards.values():
        for lane in loop.lanes().values():
            counts.update(lane.counts)
    return {state: n for state, n in sorted(counts.items()) if n}


def wait_until(condition: Any, deadline_s: float, interval_s: float = 0.005) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(interval_s)
    return False


def pulsar_home(root: Path, env: dict[str, str], args: argparse.Namespace, topic: str,
                handoff: bool) -> tuple[Path, Config]:
    home = Path(tempfile.mkdtemp(prefix="pulsar-", dir=root))
    run = uuid.uuid4().hex[:8]
    route = (f'log = "pulsar"\nservice_url = "{env["NEREUS_PULSAR_URL"]}"\n'
             f'admin_url = "{env["NEREUS_PULSAR_HTTP_URL"]}"\n'
             f'topic = "nereus-bench-{run}-commands"\n'
             if args.route_log == "pulsar" else 'log = "file"\n')
    lane = 'handoff = "deliver_at"\n' if handoff else ""
    text = (f"[routes.default]\n{route}partitions = {args.partitions}\n\n"
            f'[lanes.out]\ndestination = "pulsar"\nservice_url = "{env["NEREUS_PULSAR_URL"]}"\n'
            f'topic = "{topic}"\n{lane}')
    (home / "nereus.toml").write_text(text)
    return home, parse_config(text, source=str(home / "nereus.toml"))


def nereus_to_pulsar(root: Path, env: dict[str, str], args: argparse.Namespace,
                     delays: list[tuple[str, int]], handoff: bool) -> dict[str, Any]:
    topic = f"persistent://public/default/bench-nereus-{uuid.uuid4().hex[:10]}"
    home, config = pulsar_home(root, env, args, topic, handoff)
    route = RouteRef("default", args.partitions)
    consumer = Consumer(env["NEREUS_PULSAR_URL"], topic, len(delays),
                        args.max_delay_ms / 1000 + START_MARGIN_MS / 1000 + args.deadline, root)
    engine = Engine(home, config, settings=engine_settings(config))
    engine.start()
    logs: dict[ShardId, ShardLog] = {}
    try:
        for p in range(args.partitions):
            shard = ShardId("default", p)
            logs[shard] = open_shard_log(config.routes["default"], shard, home)
        t0 = now_ms() + START_MARGIN_MS
        deliver = {m: t0 + delay for m, delay in delays}
        began = time.monotonic()
        for start in range(0, len(delays), 1_000):
            prepared = [prepare_schedule(route, command_id=uuid.uuid4().hex, delay_message_id=m,
                                         lane="out", deliver_at_ms=deliver[m], key=m,
                                         payload=PAYLOAD)
                        for m, _ in delays[start:start + 1_000]]
            queue(prepared, logs.__getitem__)
        accepted_s = time.monotonic() - began
        if now_ms() >= t0:
            raise SystemExit(f"queueing took {accepted_s:.2f} s, past t0: raise "
                             "START_MARGIN_MS")
        seen = consumer.result()
        wait_until(lambda: message_states(engine).get("PUBLISHED", 0) >= len(delays), 10.0)
        states = message_states(engine)
        published = engine.publishers["out"].published
    finally:
        for log in logs.values():
            log.close()
        engine.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
            delete_pulsar_topic(env, topic)
    report = delivery_report(deliver, seen, accepted_s)
    report.update(states=states, engine_published=published, topic=topic,
                  route_log=args.route_log, lead_ms=config.lanes["out"].handoff_lead_ms,
                  handoff="deliver_at" if handoff else "publish")
    return report


def pulsar_direct(root: Path, env: dict[str, str], args: argparse.Namespace,
                  delays: list[tuple[str, int]]) -> dict[str, Any]:
    import pulsar

    topic = f"persistent://public/default/bench-direct-{uuid.uuid4().hex[:10]}"
    consumer = Consumer(env["NEREUS_PULSAR_URL"], topic, len(delays),
                        args.max_delay_ms / 1000 + START_MARGIN_MS / 1000 + args.deadline, root)
    client = pulsar.Client(env["NEREUS_PULSAR_URL"],
                           logger=pulsar.FileLogger(pulsar.LoggerLevel.Warn, os.devnull))
    failures: list[str] = []
    try:
        producer = client.create_producer(topic, batching_enabled=False,
                                          block_if_queue_full=True,
                                          max_pending_messages=len(delays))
        t0 = now_ms() + START_MARGIN_MS
        deliver = {m: t0 + delay for m, delay in delays}
        time.sleep(max(0.0, (t0 - now_ms()) / 1000))

        def sent(result: Any, _message_id: Any) -> None:
            if result != pulsar.Result.Ok:
                failures.append(str(result))

        began = time.monotonic()
        for m, _ in delays:
            producer.send_async(PAYLOAD, sent, properties={PROPERTY_ID: m}, partition_key=m,
                                deliver_at=deliver[m])
        producer.flush()
        accepted_s = time.monotonic() - began
        seen = consumer.result()
    finally:
        client.close()
        if not args.keep:
            delete_pulsar_topic(env, topic)
    report = delivery_report(deliver, seen, accepted_s)
    report.update(send_failures=len(failures), topic=topic, handoff="producer deliver_at")
    return report


def delete_pulsar_topic(env: dict[str, str], topic: str) -> None:
    from nereus.adapters._pulsar import admin_request, admin_topic_path

    with contextlib.suppress(Exception):  # a leftover bench topic harms nothing
        admin_request(env["NEREUS_PULSAR_HTTP_URL"], "DELETE",
                      f"admin/v2/{admin_topic_path(topic)}?force=true", timeout_s=10)


# scenario 2: Kafka -> Kafka publishes per shard ----------------------------------------------
def header_text(message: Message, name: str) -> str:
    """The value of header ``name`` of a consumed Kafka record, as text."""
    raw = message.headers() or []
    value = dict(raw.items() if isinstance(raw, dict) else raw)[name]
    if value is None:
        raise ValueError(f"record header {name} has no value")
    return value.decode() if isinstance(value, bytes) else value


def read_receipts(bootstrap: str, topic: str, expected: int,
                  deadline_s: float) -> list[tuple[str, int]]:
    """(delay message id, LogAppendTime) of every record of ``topic`` (one partition)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    out: list[tuple[str, int]] = []
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10,
                                                cached=False)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        stop = time.monotonic() + deadline_s
        while len(out) < end and time.monotonic() < stop:
            for message in consumer.consume(1_000, timeout=0.2):
                if message.error() is not None:
                    continue
                out.append((header_text(message, PROPERTY_ID), message.timestamp()[1]))
    finally:
        consumer.close()
    if len(out) < max(end, expected):
        print(f"warning: read {len(out)} of {end} records of {topic}", file=sys.stderr)
    return out


def kafka_to_kafka(root: Path, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    from nereus.adapters._kafka import ensure_topic

    bootstrap = env["NEREUS_KAFKA_BOOTSTRAP"]
    run = uuid.uuid4().hex[:10]
    command_topic, topic = f"nereus.bench-{run}.commands", f"bench-out-{run}"
    partitions, count = args.kafka_partitions, args.kafka_messages
    ensure_topic(bootstrap, topic, client_id="bench", partitions=1,
                 config={"message.timestamp.type": "LogAppendTime"}, create=True,
                 timeout_s=30)
    home = Path(tempfile.mkdtemp(prefix="kafka-", dir=root))
    text = (f'[routes.default]\nlog = "kafka"\nbootstrap = "{bootstrap}"\n'
            f'topic = "{command_topic}"\npartitions = {partitions}\n\n'
            f'[lanes.out]\ndestination = "kafka"\nbootstrap = "{bootstrap}"\ntopic = "{topic}"\n')
    (home / "nereus.toml").write_text(text)
    config = parse_config(text, source=str(home / "nereus.toml"))
    route = RouteRef("default", partitions)
    engine = Engine(home, config, settings=engine_settings(config))
    engine.start()
    logs: dict[ShardId, ShardLog] = {}
    try:
        for p in range(partitions):
            shard = ShardId("default", p)
            logs[shard] = open_shard_log(config.routes["default"], shard, home)
        due_ms = now_ms() + args.kafka_lead_ms
        began = time.monotonic()
        for start in range(0, count, 1_000):
            prepared = [prepare_schedule(route, command_id=uuid.uuid4().hex,
                                         delay_message_id=f"k{n:06d}", lane="out",
                                         deliver_at_ms=due_ms, key=f"k{n % 97}",
                                         payload=PAYLOAD)
                        for n in range(start, min(count, start + 1_000))]
            queue(prepared, logs.__getitem__)
        queue_s = time.monotonic() - began
        ends = {s: log.end_position() for s, log in logs.items()}
        applied = wait_until(lambda: all(
            (engine.shards[s].applied_position or -1) >= e - 1 for s, e in ends.items()),
            max(0.0, (due_ms - now_ms()) / 1000))
        applied_before_due_ms = due_ms - now_ms()
        publisher = engine.publishers["out"]
        done = wait_until(lambda: publisher.published >= count,
                          args.deadline + max(0.0, (due_ms - now_ms()) / 1000), 0.002)
        wait_until(lambda: message_states(engine).get("PUBLISHED", 0) >= count, args.deadline)
        states = message_states(engine)
    finally:
        for log in logs.values():
            log.close()
        engine.stop()
    if not done:
        raise SystemExit(f"kafka: only {publisher.published} of {count} published in time")
    receipts = read_receipts(bootstrap, topic, count, args.deadline)
    by_shard: dict[str, list[int]] = {}
    for message_id, stamp in receipts:
        by_shard.setdefault(f"default/{partition_for(message_id, partitions)}", []).append(stamp)
    per_shard = {}
    for name, stamps in sorted(by_shard.items()):
        span_ms = max(max(stamps) - min(stamps), 1)
        per_shard[name] = {"published": len(stamps), "first_after_due_ms": min(stamps) - due_ms,
                      "last_after_due_ms": max(stamps) - due_ms, "span_ms": span_ms,
                      "rate_per_s": round(len(stamps) / span_ms * 1000),
                      "rate_from_due_per_s": round(
                          len(stamps) / max(max(stamps) - due_ms, 1) * 1000)}
    worst = min((s["rate_per_s"] for s in per_shard.values()), default=0)
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
        delete_kafka_topics(bootstrap, [topic, command_topic])
    return {
        "messages": count,
        "partitions": partitions,
        "queued_per_s": round(count / queue_s),
        "applied_before_due": applied,
        "applied_ms_before_due": applied_before_due_ms,
        "records_on_topic": len(receipts),
        "duplicates": len(receipts) - len({m for m, _ in receipts}),
        "states": states,
        "per_shard": per_shard,
        "rate_per_shard_min": worst,
        "target_per_shard": TARGET_RATE_PER_SHARD,
        "met": worst >= TARGET_RATE_PER_SHARD,
    }


def delete_kafka_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    with contextlib.suppress(Exception):  # a leftover bench topic harms nothing
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
        for future in admin.delete_topics(topics, operation_timeout=10).values():
            future.result(timeout=15)


# report ----------------------------------------------------------------------------------
def render_delivery(name: str, r: dict[str, Any]) -> list[str]:
    lat = r["lateness_ms"]
    accepted = (f"accepted {r['messages']:,} in {r['accepted_s']} s = "
                f"{r['accepted_per_s']:,}/s" if r["accepted_per_s"] else "")
    lead = f"; handed over {r['lead_ms']} ms early" if r.get("lead_ms") else ""
    return [
        f"  {name:<15} received {r['received']:,}/{r['messages']:,} "
        f"({r['received_per_s'] or 0:,}/s over the span); {accepted}{lead}",
        f"  {'':<15} lateness p50 {lat['p50']} ms  p99 {lat['p99']} ms  max {lat['max']} ms  "
        f"min {lat['min']} ms; BEFORE deliverAt {r['early']} (by up to {r['early_max_ms']} "
        f"ms); missing {r['missing']}, duplicates {r['duplicates']}",
    ]


def render(report: dict[str, Any]) -> str:
    out = [f"Nereus Delay broker bench: {report['cpus']} CPU(s); "
           f"{report['command']}"]
    if "pulsar" in report:
        p = report["pulsar"]
        out.append(f"pulsar  {p['messages']:,} messages, delays {p['delay_ms'][0]}-"
                   f"{p['delay_ms'][1]} ms (seed {p['seed']}), Shared subscription; Nereus "
                   f"route on the {p['route_log']} log, {p['partitions']} shard(s)")
        out.extend(render_delivery("nereus publish", p["nereus"]))
        if "nereus_handoff" in p:
            out.extend(render_delivery("nereus handoff", p["nereus_handoff"]))
        out.extend(render_delivery("pulsar direct", p["direct"]))
        n = p["nereus"]
        out.append(f"  target: Nereus (publish) never before deliverAt: "
                   f"{'MET' if n['early'] == TARGET_EARLY_NEREUS else 'MISSED'} "
                   f"({n['early']}); p99 < {TARGET_P99_MS} ms: "
                   f"{'MET' if n['lateness_ms']['p99'] < TARGET_P99_MS else 'MISSED'}; "
                   f"states {n['states']}")
    if "kafka" in report:
        k = report["kafka"]
        out.append(f"kafka   {k['messages']:,} messages due at once, route and lane on Kafka, "
                   f"{k['partitions']} shard(s); queued {k['queued_per_s']:,}/s, applied "
                   f"{'before' if k['applied_before_due'] else 'NOT before'} due "
                   f"({k['applied_ms_before_due']} ms to spare)")
        for shard, s in k["per_shard"].items():
            out.append(f"  {shard}: {s['published']:,} receipts, first {s['first_after_due_ms']}"
                       f" ms / last {s['last_after_due_ms']} ms after due; first->last "
                       f"{s['span_ms']} ms = {s['rate_per_s']:,}/s (from due "
                       f"{s['rate_from_due_per_s']:,}/s)")
        out.append(f"  target >= {k['target_per_shard']:,} publishes/s per shard: "
                   f"{'MET' if k['met'] else 'MISSED'} (records {k['records_on_topic']:,}, "
                   f"duplicates {k['duplicates']}, states {k['states']})")
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
    root = Path(tempfile.mkdtemp(prefix="nereus-brokers-", dir=args.dir))
    report: dict[str, Any] = {"cpus": os.cpu_count(),
                              "command": " ".join([Path(sys.executable).name, *sys.argv])}
    try:
        with brokers(needed) as env:
            if "pulsar" in needed:
                delays = plan(args)
                pulsar: dict[str, Any] = {
                    "messages": args.messages, "seed": args.seed,
                    "delay_ms": [args.min_delay_ms, args.max_delay_ms],
                    "route_log": args.route_log, "partitions": args.partitions}
                pulsar["nereus"] = nereus_to_pulsar(root, env, args, delays, handoff=False)
                if not args.no_handoff:
                    pulsar["nereus_handoff"] = nereus_to_pulsar(root, env, args, delays,
                                                                handoff=True)
                pulsar["direct"] = pulsar_direct(root, env, args, delays)
                report["pulsar"] = pulsar
            if "kafka" in needed:
                report["kafka"] = kafka_to_kafka(root, env, args)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    report["targets"] = {"nereus_early": TARGET_EARLY_NEREUS, "p99_ms": TARGET_P99_MS,
                         "kafka_rate_per_shard": TARGET_RATE_PER_SHARD}
    report["notes"] = list(NOTES)
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
