"""Scenario 1 of ``bench/brokers.py``: the same delayed messages delivered to Pulsar three
ways (Nereus publishing when due, Nereus handing off with ``deliver_at``, Pulsar's own
``deliver_at`` from the bench's producer), each to a fresh topic.

A consumer in a separate process (so it shares no GIL with the engine) records when it
receives each message, by the ``nereus-delay-message-id`` property the Pulsar destination
sets (the bench's own producer sets it too). Every clock is the same host's clock.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec

from inprocess_engine import (
    PAYLOAD,
    Due,
    all_published,
    message_states,
    new_home,
    now_ms,
    percentile,
    queue_due,
    running,
    wait_for,
)
from nereus.adapters.backends.pulsar.pulsar_evidence import PROPERTY_DELAY_MESSAGE_ID as PROPERTY_ID
from nereus.config import Config

START_MARGIN_MS = 1_500  # t0 = now + this: every SCHEDULE is queued and applied before t0
SETTLE_S = 1.0  # the consumer keeps listening this long after the last expected message


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


def consumer_for(topic: str, env: dict[str, str], args: argparse.Namespace, expected: int,
                 work: Path) -> Consumer:
    """A consumer that listens until the last delay has passed, plus ``--deadline``."""
    return Consumer(env["NEREUS_PULSAR_URL"], topic, expected,
                    args.max_delay_ms / 1000 + START_MARGIN_MS / 1000 + args.deadline, work)


# the figures -------------------------------------------------------------------------------
class Lateness(msgspec.Struct, frozen=True):
    p50: int
    p99: int
    max: int
    min: int


class Delivery(msgspec.Struct, frozen=True):
    """How the messages arrived: lateness = first receive - deliverAt."""

    messages: int
    received: int
    missing: int
    duplicates: int
    strays: int
    accepted_per_s: int | None
    accepted_s: float
    received_per_s: int | None
    lateness_ms: Lateness
    early: int
    early_max_ms: int


class NereusDelivery(Delivery, frozen=True):
    states: dict[str, int]
    engine_published: int
    topic: str
    route_log: str
    lead_ms: int
    handoff: str


class DirectDelivery(Delivery, frozen=True):
    send_failures: int
    topic: str
    handoff: str


class PulsarSection(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The three ways, over the same plan; ``nereus_handoff`` is absent with
    ``--no-handoff``."""

    messages: int
    seed: int
    delay_ms: list[int]
    route_log: str
    partitions: int
    nereus: NereusDelivery
    nereus_handoff: NereusDelivery | None = None
    direct: DirectDelivery


def delivery_report(deliver: dict[str, int], seen: dict[str, list[int]],
                    accepted_s: float) -> Delivery:
    """Lateness (first receive - deliverAt), early, missing and duplicate counts."""
    firsts = {m: min(t) for m, t in seen.items() if m in deliver}
    lateness = sorted(firsts[m] - deliver[m] for m in firsts)
    early = [value for value in lateness if value < 0]
    span_ms = max(firsts.values()) - min(firsts.values()) if firsts else 0
    return Delivery(
        messages=len(deliver),
        received=len(firsts),
        missing=len(set(deliver) - set(firsts)),
        duplicates=sum(len(t) - 1 for m, t in seen.items() if m in deliver),
        strays=len(set(seen) - set(deliver)),
        accepted_per_s=round(len(deliver) / accepted_s) if accepted_s > 0 else None,
        accepted_s=round(accepted_s, 3),
        received_per_s=round(len(firsts) / span_ms * 1000) if span_ms else None,
        lateness_ms=Lateness(p50=percentile(lateness, 0.50), p99=percentile(lateness, 0.99),
                             max=lateness[-1] if lateness else 0,
                             min=lateness[0] if lateness else 0),
        early=len(early),
        early_max_ms=-min(early) if early else 0,
    )


# the three ways ----------------------------------------------------------------------------
def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(id, delay ms after t0): the same for every variant."""
    rng = random.Random(args.seed)
    return [(f"m{n:05d}", rng.randint(args.min_delay_ms, args.max_delay_ms))
            for n in range(args.messages)]


def pulsar_home(root: Path, env: dict[str, str], args: argparse.Namespace, topic: str,
                handoff: bool) -> tuple[Path, Config]:
    run = uuid.uuid4().hex[:8]
    route = (f'log = "pulsar"\nservice_url = "{env["NEREUS_PULSAR_URL"]}"\n'
             f'admin_url = "{env["NEREUS_PULSAR_HTTP_URL"]}"\n'
             f'topic = "nereus-bench-{run}-commands"\n'
             if args.route_log == "pulsar" else 'log = "file"\n')
    lane = 'handoff = "deliver_at"\n' if handoff else ""
    text = (f"[routes.default]\n{route}partitions = {args.partitions}\n\n"
            f'[lanes.out]\ndestination = "pulsar"\nservice_url = "{env["NEREUS_PULSAR_URL"]}"\n'
            f'topic = "{topic}"\n{lane}')
    return new_home(root, "pulsar-", text)


def nereus_to_pulsar(root: Path, env: dict[str, str], args: argparse.Namespace,
                     delays: list[tuple[str, int]], handoff: bool) -> NereusDelivery:
    topic = f"persistent://public/default/bench-nereus-{uuid.uuid4().hex[:10]}"
    home, config = pulsar_home(root, env, args, topic, handoff)
    consumer = consumer_for(topic, env, args, len(delays), root)
    try:
        with running(home, config) as run:
            engine = run.engine
            t0 = now_ms() + START_MARGIN_MS
            deliver = {m: t0 + delay for m, delay in delays}
            began = time.monotonic()
            queue_due(run.logs, (Due(m, m, deliver[m]) for m, _ in delays), lane="out")
            accepted_s = time.monotonic() - began
            if now_ms() >= t0:
                raise SystemExit(f"queueing took {accepted_s:.2f} s, past t0: raise "
                                 "START_MARGIN_MS")
            seen = consumer.result()
            wait_for(lambda: all_published(engine, len(delays)), 10.0)
            states = message_states(engine)
            published = engine.publishers["out"].published
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
            delete_pulsar_topic(env, topic)
    report = delivery_report(deliver, seen, accepted_s)
    return NereusDelivery(**msgspec.structs.asdict(report), states=states,
                          engine_published=published, topic=topic, route_log=args.route_log,
                          lead_ms=config.lanes["out"].handoff_lead_ms,
                          handoff="deliver_at" if handoff else "publish")


def pulsar_direct(root: Path, env: dict[str, str], args: argparse.Namespace,
                  delays: list[tuple[str, int]]) -> DirectDelivery:
    import pulsar

    topic = f"persistent://public/default/bench-direct-{uuid.uuid4().hex[:10]}"
    consumer = consumer_for(topic, env, args, len(delays), root)
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
    return DirectDelivery(**msgspec.structs.asdict(report), send_failures=len(failures),
                          topic=topic, handoff="producer deliver_at")


def delete_pulsar_topic(env: dict[str, str], topic: str) -> None:
    from nereus.adapters.backends.pulsar.pulsar_client import admin_request, admin_topic_path

    with contextlib.suppress(Exception):  # a leftover bench topic harms nothing
        admin_request(env["NEREUS_PULSAR_HTTP_URL"], "DELETE",
                      f"admin/v2/{admin_topic_path(topic)}?force=true", timeout_s=10)


def run_pulsar(root: Path, env: dict[str, str], args: argparse.Namespace) -> PulsarSection:
    """Nereus publish, Nereus handoff (unless ``--no-handoff``), then Pulsar direct."""
    delays = plan(args)
    nereus = nereus_to_pulsar(root, env, args, delays, handoff=False)
    handoff = (None if args.no_handoff
               else nereus_to_pulsar(root, env, args, delays, handoff=True))
    return PulsarSection(messages=args.messages, seed=args.seed,
                         delay_ms=[args.min_delay_ms, args.max_delay_ms],
                         route_log=args.route_log, partitions=args.partitions,
                         nereus=nereus, nereus_handoff=handoff,
                         direct=pulsar_direct(root, env, args, delays))
