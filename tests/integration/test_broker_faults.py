"""Broker faults on real servers: a destination broker that stops mid-run, an engine that is
SIGKILLed while it publishes to Kafka.

1. **Kafka stops under a lane.** The route is on the embedded file log, so only the
   destination broker goes away. Lane ``kafka_lane`` publishes to the session's Kafka,
   lane ``local`` to a file. While a trickle of due messages is being published, Kafka is
   stopped (``scripts/services down kafka``): the Kafka lane goes NOT READY, attempts that
   were handed to the producer end UNKNOWN (never NOT_PUBLISHED), attempts declined before
   any send are NOT_PUBLISHED and back on the timeline, and the file lane keeps publishing
   on time. Kafka is started again: the lane becomes READY, the rest is published, and
   evidence recovery settles every UNKNOWN attempt whose record did land.
2. **The engine is SIGKILLed while publishing to Kafka** (route and lane on Kafka, the
   daemon a subprocess): after a restart every command was applied exactly once, every
   message is PUBLISHED or UNCERTAIN, and the destination topic holds each PUBLISHED message
   exactly once and no record of a message still UNCERTAIN.

An UNKNOWN attempt is never retried, so a message whose record never landed stays UNCERTAIN
(for an operator): the consumer sees every PUBLISHED message, none of those.

Kafka is always started again in a ``finally`` so later tests have it; every child process
is killed in a finalizer; every wait polls a condition under a deadline. Test 1 gives the
Kafka lane the real adapter with a 4 s delivery timeout (the default 30 s would only make
the test slower) and notes every publish call made while its lane was NOT READY.

Test 1 found the lane publisher handing requests queued while the lane was READY to a
destination that had failed since: with Kafka down, every message claimed during the first
failed call (100 of 140 here) was produced into a dead broker and ended UNCERTAIN. The
publisher now probes first and declines them (NOT_PUBLISHED LANE_UNAVAILABLE, never handed
to the destination), so they are published after the restart.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.shardlog.factory import open_shard_log
from nereus.adapters.shardlog.kafka import KafkaShardLog
from nereus.client import RouteRef, prepare_cancel, prepare_schedule
from nereus.config import parse_config
from nereus.engine.destinations.kafka import KafkaDestination
from nereus.engine.destinations.kafka_evidence import ATTEMPT_ID_HEADER, DELAY_MESSAGE_ID_HEADER
from nereus.engine.destinations.protocol import PublishRequest, PublishResult
from nereus.engine.engine import Engine, EngineSettings
from nereus.engine.publisher import LanePublisher
from nereus.layout import HomeLayout
from nereus.machine import dedup_key
from nereus.records import (
    AttemptState,
    DecodeFailure,
    Disposition,
    MessageState,
    Outcome,
    decode,
)
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, decode_int, decode_value
from nereus.views import find_message, open_attempts
from tests.daemon import DaemonRun
from tests.integration.engine_harness import lateness_ms
from tests.integration.kafka_service import (  # noqa: F401
    KafkaService,
    kafka_service,
    text_headers,
)
from tests.integration.services import run_services

# the Kafka lane's delivery timeout in test 1: a call in progress when the broker goes away
# returns (UNKNOWN) after this long; the adapter's default, 30 s, would only slow the test
DELIVERY_TIMEOUT_S = 4.0
SERVICE_TIMEOUT_S = 120
POLL_S = 0.02

# the evidence of every NOT_PUBLISHED outcome that proves the record never left this
# process: declined by the shard loop or the lane publisher, refused before the producer
# took it, or declined by a stopping engine. A lost answer (a timeout) is never one of them.
NEVER_LEFT = re.compile(
    r"^(owner declined before any send: "
    r"|lane \S+ NOT READY \(.*\): never handed to the destination$"
    r"|kafka:\S+: nothing was sent: "
    r"|kafka:\S+: produce\(\) refused it: "
    r"|engine stopping: the request never reached the destination$)", re.DOTALL)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_for(what: str, condition: Callable[[], bool], deadline_s: float,
             seen: Callable[[], object] | None = None) -> float:
    """Poll ``condition`` until it holds (returns the monotonic time it did); fail naming
    ``what`` and ``seen()`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            last = f"; last seen: {seen()}" if seen is not None else ""
            pytest.fail(f"{what}: not reached within {deadline_s} s{last}")
        time.sleep(POLL_S)
    return time.monotonic()


def services(action: str) -> None:
    proc = run_services(action, "kafka", timeout=SERVICE_TIMEOUT_S)
    assert proc.returncode == 0, f"scripts/services {action} kafka: {proc.stderr[-2_000:]}"


@contextlib.contextmanager
def kafka_restored() -> Iterator[None]:
    """Whatever happens inside, Kafka is running again afterwards (later tests need it)."""
    try:
        yield
    finally:
        if run_services("status", "kafka", timeout=30).returncode != 0:
            services("up")


# the destination topic, read from the beginning ------------------------------------------
@dataclass(frozen=True, slots=True)
class TopicRecord:
    delay_message_id: str
    attempt_id: str
    partition: int
    offset: int
    timestamp_ms: int


def read_topic(bootstrap: str, topic: str, deadline_s: float = 30.0) -> list[TopicRecord]:
    """Every record of ``topic`` up to its current end, by a consumer of its own."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"faults-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    records: list[TopicRecord] = []
    try:
        metadata = consumer.list_topics(topic=topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10,
                                                  cached=False)[1] for p in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        end_at = time.monotonic() + deadline_s
        while pending:
            assert time.monotonic() < end_at, f"{topic}: partitions {pending} not read in time"
            for message in consumer.consume(500, timeout=0.2):
                partition, offset = message.partition(), message.offset()
                if message.error() is not None or partition is None or offset is None:
                    continue
                headers = text_headers(message)
                records.append(TopicRecord(headers[DELAY_MESSAGE_ID_HEADER],
                                           headers[ATTEMPT_ID_HEADER], partition, offset,
                                           message.timestamp()[1]))
                if offset >= ends[partition] - 1:
                    pending.discard(partition)
    finally:
        consumer.close()
    return records


# the attempt ledger ----------------------------------------------------------------------
def attempts_of(store: ShardStore) -> list[Attempt]:
    return [decode_value(raw, Attempt) for _, raw in store.scan_prefix(keys.ATTEMPT)]


def check_not_published(attempts: list[Attempt], on_topic: set[str]) -> int:
    """Every NOT_PUBLISHED outcome (settling or late) says the record never left, with a
    disposition that keeps the message, and no such attempt's record is on the topic."""
    checked = 0
    for attempt in attempts:
        outcomes = [(attempt.disposition.value, attempt.evidence)] \
            if attempt.state == AttemptState.NOT_PUBLISHED else []
        outcomes += [(late.disposition, late.evidence) for late in attempt.late_outcomes
                     if late.outcome == Outcome.NOT_PUBLISHED]
        for disposition, evidence in outcomes:
            checked += 1
            assert disposition in (Disposition.LANE_UNAVAILABLE, Disposition.RETRIABLE), (
                f"{attempt.attempt_id}: NOT_PUBLISHED {disposition}: {evidence}")
            assert NEVER_LEFT.match(evidence), (
                f"{attempt.attempt_id}: NOT_PUBLISHED without proof it never left: {evidence}")
        if attempt.state == AttemptState.NOT_PUBLISHED:
            assert attempt.attempt_id not in on_topic, (
                f"{attempt.attempt_id} ({attempt.delay_message_id}) is NOT_PUBLISHED, yet its "
                f"record is on the destination topic: {attempt.evidence}")
    return checked


# test 1: the destination broker stops mid-run --------------------------------------------
TRICKLE = 300  # messages, alternating between the two lanes
TRICKLE_SPAN_MS = 6_000
TRICKLE_LEAD_MS = 1_000
CANCELLED = 10  # Kafka-lane messages due last, cancelled at once
PUBLISHED_BEFORE_STOP = 20  # Kafka-lane publishes before the broker is stopped
LOCAL_P99_MS = 1_000


class WatchedKafka(KafkaDestination):
    """The real Kafka adapter, noting every publish call made while its lane was NOT READY."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.publisher: LanePublisher | None = None
        self.calls_while_not_ready: list[tuple[int, str | None]] = []

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        if self.publisher is not None and not self.publisher.ready:
            self.calls_while_not_ready.append((len(requests), self.publisher.not_ready_reason))
        return super().publish(requests, now_ms)


def trickle_config(bootstrap: str, topic: str) -> str:
    return f"""
[routes.default]
log = "file"
partitions = 2

[lanes.kafka_lane]
destination = "kafka"
bootstrap = "{bootstrap}"
topic = "{topic}"

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"

[engine]
evidence_interval_s = 1
"""


def outbox_lines(home: Path) -> list[dict[str, Any]]:
    import json

    path = HomeLayout(home).outbox / "local.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines() if line]


def lane_counts(engine: Engine, lane: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for loop in engine.shards.values():
        counts.update(loop.lanes()[lane].counts)
    return counts


def test_destination_broker_stops_mid_run(tmp_path: Path,
                                          kafka_service: KafkaService) -> None:  # noqa: F811
    """Kafka stops while its lane publishes: the lane goes NOT READY, in-flight attempts end
    UNKNOWN (never NOT_PUBLISHED), the file lane stays on time; after a restart the rest is
    published and evidence settles every UNKNOWN attempt whose record landed."""
    bootstrap = kafka_service.require()
    topic = f"faults-{uuid.uuid4().hex[:10]}"
    home = tmp_path / "home"
    home.mkdir()
    text = trickle_config(bootstrap, topic)
    (home / "nereus.toml").write_text(text)
    config = parse_config(text, source=str(home / "nereus.toml"))
    route_settings = config.routes["default"]
    route = RouteRef("default", route_settings.partitions)
    shards = [ShardId("default", p) for p in range(route_settings.partitions)]
    start = now_ms()
    deliver = {f"t{n:03d}-{'k' if n % 2 == 0 else 'l'}":
               start + TRICKLE_LEAD_MS + n * TRICKLE_SPAN_MS // TRICKLE
               for n in range(TRICKLE)}
    lane_of = {m: "kafka_lane" if m.endswith("-k") else "local" for m in deliver}
    cancelled = set(sorted(m for m in deliver if lane_of[m] == "kafka_lane")[-CANCELLED:])
    timeline: dict[str, float] = {}
    with kafka_restored():
        destination = WatchedKafka("kafka_lane", bootstrap, topic, timeout_s=DELIVERY_TIMEOUT_S)
        engine = Engine(
            home, config, settings=EngineSettings.from_config(config.engine),
            destinations={"kafka_lane": destination})
        engine.start()
        destination.publisher = engine.publishers["kafka_lane"]
        logs = {shard: open_shard_log(route_settings, shard, home) for shard in shards}
        try:
            prepared = [prepare_schedule(route, command_id=f"s-{m}", delay_message_id=m,
                                         lane=lane_of[m], deliver_at_ms=at, key=m,
                                         payload=m.encode()) for m, at in deliver.items()]
            prepared += [prepare_cancel(route, command_id=f"c-{m}", delay_message_id=m)
                         for m in sorted(cancelled)]
            by_shard: dict[ShardId, list[bytes]] = {}
            for item in prepared:
                by_shard.setdefault(item.shard, []).append(item.data)
            for shard, payloads in by_shard.items():
                logs[shard].append(payloads)
            kafka_lane = engine.publishers["kafka_lane"]
            wait_for("the Kafka lane publishing", lambda: kafka_lane.published
                     >= PUBLISHED_BEFORE_STOP, 20.0, seen=lambda: kafka_lane.published)
            timeline["stop"] = time.monotonic()
            local_at_stop = len(outbox_lines(home))
            services("down")
            timeline["stopped"] = time.monotonic()
            timeline["not_ready"] = wait_for(
                "the Kafka lane NOT READY", lambda: not kafka_lane.ready,
                DELIVERY_TIMEOUT_S + 15.0, seen=lambda: kafka_lane.not_ready_reason)
            reason = kafka_lane.not_ready_reason
            assert reason, "NOT READY names its reason"
            assert engine.publishers["local"].ready
            # the broker stays down until everything is due: the file lane must not wait
            last_due = max(deliver.values())
            wait_for("everything due", lambda: now_ms() > last_due + 300, 30.0)
            local_while_down = len(outbox_lines(home))
            assert not kafka_lane.ready, "the broker is still down"
            stuck = lane_counts(engine, "kafka_lane")
            services("up")
            timeline["restarted"] = time.monotonic()
            timeline["ready"] = wait_for("the Kafka lane READY again", lambda: kafka_lane.ready,
                                         30.0, seen=lambda: kafka_lane.not_ready_reason)

            def kafka_lane_settled() -> bool:
                counts = lane_counts(engine, "kafka_lane")
                return not counts.get(MessageState.SCHEDULED) and \
                    not counts.get(MessageState.PUBLISHING)

            wait_for("no Kafka-lane message left SCHEDULED or PUBLISHING", kafka_lane_settled,
                     40.0, seen=lambda: lane_counts(engine, "kafka_lane"))

            def unknown_attempts() -> dict[str, Attempt]:
                return {a.attempt_id: a for loop in engine.shards.values()
                        for a in open_attempts(loop.store, state=AttemptState.UNKNOWN)}

            def landed_unknown() -> set[str]:
                on_topic = {r.attempt_id for r in read_topic(bootstrap, topic)}
                return set(unknown_attempts()) & on_topic

            wait_for("evidence recovery settling every UNKNOWN attempt that landed",
                     lambda: not landed_unknown(), 30.0, seen=landed_unknown)
            timeline["settled"] = time.monotonic()
        finally:
            for log in logs.values():
                log.close()
            if run_services("status", "kafka", timeout=30).returncode != 0:
                services("up")
            engine.stop()

    # what the broker holds, what the file holds, what the shards say
    records = read_topic(bootstrap, topic)
    on_topic = {r.attempt_id for r in records}
    copies = Counter(r.delay_message_id for r in records)
    states: dict[str, MessageState] = {}
    attempts: list[Attempt] = []
    for shard in shards:
        with ShardStore.open(HomeLayout(home).shard_state(shard), read_only=True) as store:
            attempts += attempts_of(store)
            for m in deliver:
                message = find_message(store, m)
                if message is not None:
                    states[m] = message.state
    by_message: dict[str, list[Attempt]] = {}
    for attempt in attempts:
        by_message.setdefault(attempt.delay_message_id, []).append(attempt)
    assert not destination.calls_while_not_ready, (
        f"a NOT READY lane handed batches to its destination (size, reason): "
        f"{destination.calls_while_not_ready[:3]}")
    declined = check_not_published(attempts, on_topic)
    was_unknown = {a.delay_message_id for a in attempts
                   if a.state == AttemptState.UNKNOWN or a.evidence.startswith("evidence scan:")}
    scanned = [a for a in attempts if a.evidence.startswith("evidence scan:")]
    for attempt in scanned:
        assert attempt.state == AttemptState.PUBLISHED, attempt
        assert states[attempt.delay_message_id] == MessageState.PUBLISHED

    # the file lane: every message once, on time, and it kept going while Kafka was down
    local = outbox_lines(home)
    local_ids = Counter(line["delay_message_id"] for line in local)
    expected_local = {m for m in deliver if lane_of[m] == "local"}
    assert set(local_ids) == expected_local and max(local_ids.values()) == 1
    assert local_while_down > local_at_stop + 20, (
        f"the file lane stalled with Kafka down: {local_at_stop} -> {local_while_down} lines")
    late = sorted(lateness_ms(line) for line in local)
    p99 = late[min(len(late) - 1, round(0.99 * (len(late) - 1)))]
    assert late[0] >= 0 and p99 < LOCAL_P99_MS, f"file lane lateness p99 {p99} ms (min {late[0]})"

    # the Kafka lane: nothing lost, nothing early, duplicates only after an UNKNOWN attempt
    for m in (m for m in deliver if lane_of[m] == "kafka_lane"):
        if m in cancelled:
            assert states[m] == MessageState.CANCELLED and copies[m] == 0, m
            continue
        assert states[m] in (MessageState.PUBLISHED, MessageState.UNCERTAIN), (
            f"{m}: {states[m]} ({by_message.get(m)})")
        if states[m] == MessageState.PUBLISHED:
            assert copies[m] >= 1, f"{m}: PUBLISHED but not on the topic"
        else:
            assert copies[m] == 0, f"{m}: UNCERTAIN although its record landed"
        assert copies[m] <= 1 or m in was_unknown, f"{m}: {copies[m]} copies"
    early = [(r.delay_message_id, deliver[r.delay_message_id] - r.timestamp_ms)
             for r in records if r.timestamp_ms < deliver[r.delay_message_id]]
    assert not early, f"records stamped before deliverAt (ms early): {early[:5]}"
    kafka_states = Counter(states[m] for m in deliver if lane_of[m] == "kafka_lane")
    print(f"\nKafka lane: {dict(kafka_states)}; NOT_PUBLISHED outcomes {declined}; "
          f"settled by evidence scan {len(scanned)}; while down {dict(stuck)}; "
          f"NOT READY {timeline['not_ready'] - timeline['stopped']:.1f} s after the broker "
          f"stopped ({reason}); READY {timeline['ready'] - timeline['restarted']:.1f} s after "
          f"it restarted; file lane {len(local)} lines, lateness p99 {p99} ms max {late[-1]} ms")
    assert kafka_states[MessageState.PUBLISHED] > PUBLISHED_BEFORE_STOP, kafka_states


# test 2: the engine SIGKILLed while publishing to Kafka ----------------------------------
SCHEDULES = 2_000
SPREAD_MS = 3_000
SCHEDULE_LEAD_MS = 1_500
KILL_AFTER_PUBLISHED = 400
PARTITIONS = 2


def test_engine_sigkilled_while_publishing_to_kafka(
    tmp_path: Path, kafka_service: KafkaService,  # noqa: F811
) -> None:
    """SIGKILL mid-publishing, restart: every command applied once, every message PUBLISHED
    or UNCERTAIN, each PUBLISHED message exactly once on the topic, no UNCERTAIN one there."""
    bootstrap = kafka_service.require()
    run = uuid.uuid4().hex[:10]
    command_topic, topic = f"nereus.kill-{run}.commands", f"kill-out-{run}"
    home = tmp_path / "home"
    home.mkdir()
    (home / "nereus.toml").write_text(f"""
[routes.default]
log = "kafka"
bootstrap = "{bootstrap}"
topic = "{command_topic}"
partitions = {PARTITIONS}

[lanes.out]
destination = "kafka"
bootstrap = "{bootstrap}"
topic = "{topic}"

[engine]
evidence_interval_s = 1
""")
    route = RouteRef("default", PARTITIONS)
    shards = [ShardId("default", p) for p in range(PARTITIONS)]
    owned: list[subprocess.Popen[bytes]] = []
    logs: dict[ShardId, KafkaShardLog] = {}
    receipts: dict[tuple[ShardId, int], str] = {}  # (shard, position) -> command id
    try:
        first = DaemonRun(home, 0, owned)
        first.wait_ready()
        logs = {s: KafkaShardLog(bootstrap, command_topic, s.partition, partitions=PARTITIONS,
                                 create=False) for s in shards}
        base = now_ms() + SCHEDULE_LEAD_MS
        deliver = {f"k{n:04d}": base + n * SPREAD_MS // SCHEDULES for n in range(SCHEDULES)}
        prepared = [prepare_schedule(route, command_id=f"s-{m}", delay_message_id=m, lane="out",
                                     deliver_at_ms=at, key=m, payload=m.encode())
                    for m, at in deliver.items()]
        by_shard: dict[ShardId, list[Any]] = {}
        for item in prepared:
            by_shard.setdefault(item.shard, []).append(item)
        for shard, items in by_shard.items():
            for item, receipt in zip(items, logs[shard].append([i.data for i in items]),
                                     strict=True):
                receipts[(shard, receipt.position)] = item.command_id
        wait_for("publishing under way", lambda: first.lane("out")["published"]
                 >= KILL_AFTER_PUBLISHED, 30.0, seen=lambda: first.lane("out"))
        published_at_kill = first.lane("out")["published"]
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
        assert published_at_kill < SCHEDULES, "the kill came too late to hit publishing"

        second = DaemonRun(home, 1, owned)
        second.wait_ready()

        def quiet() -> bool:
            status = second.status()
            if status is None or now_ms() < max(deliver.values()) + 200:
                return False
            (lane,) = status["lanes"]
            by_state = lane["messages_by_state"]
            return (all(s["lag"] == 0 and s["in_flight"] == 0 and s["claims"] == 0
                        for s in status["shards"])
                    and not by_state.get("SCHEDULED") and not by_state.get("PUBLISHING"))

        wait_for("nothing left due", quiet, 60.0, seen=second.status)

        def landed_uncertain() -> set[str]:
            status = second.status()
            if status is None or not any(s["uncertain"] for s in status["shards"]):
                return set()
            answer = second.admin.get("/v1/attempts", state="UNKNOWN")
            unknown = {a["attempt_id"] for a in answer["attempts"]}
            return unknown & {r.attempt_id for r in read_topic(bootstrap, topic)}

        wait_for("evidence recovery settling every UNKNOWN attempt that landed",
                 lambda: not landed_uncertain(), 30.0, seen=landed_uncertain)
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=60) == 0, second.output()
        ends = {s: logs[s].end_position() for s in shards}
        applied: dict[ShardId, dict[int, bytes]] = {}
        for shard in shards:
            position, payloads = 0, {}
            while position < ends[shard]:
                batch = logs[shard].read(position, 5_000)
                assert batch, f"{shard}: nothing readable at {position} (end {ends[shard]})"
                payloads.update({r.position: r.payload for r in batch})
                position = batch[-1].position + 1
            applied[shard] = payloads
    finally:
        for log in logs.values():
            log.close()
        for proc in owned:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)

    topic_records = read_topic(bootstrap, topic)
    copies = Counter(r.delay_message_id for r in topic_records)
    by_attempt = {r.attempt_id: r for r in topic_records}
    states: Counter[str] = Counter()
    by_scan = 0  # attempts made UNKNOWN by the restart, then settled by evidence
    for shard in shards:
        with ShardStore.open(HomeLayout(home).shard_state(shard), read_only=True) as store:
            raw = store.get(keys.META_RECORDS)
            assert raw is not None and decode_int(raw) == ends[shard], (
                f"{shard}: records applied {raw and decode_int(raw)} != log end {ends[shard]}")
            assert store.applied_position() == ends[shard] - 1
            for position, data in applied[shard].items():
                decoded = decode(data)
                key = None if isinstance(decoded, DecodeFailure) else dedup_key(decoded)
                assert key is None or store.get(keys.result_key(key)) is not None or \
                    store.get(keys.reject_key(position)) is not None, (
                    f"{shard}@{position}: no result")
            for (receipt_shard, position), command_id in receipts.items():
                if receipt_shard == shard:
                    assert store.get(keys.result_key(f"c/{command_id}")) is not None, (
                        f"receipt {shard}@{position} ({command_id}) has no result")
            attempts = attempts_of(store)
            check_not_published(attempts, set(by_attempt))
            for attempt in attempts:
                if attempt.evidence.startswith("evidence scan:"):
                    by_scan += 1
                    assert attempt.state == AttemptState.PUBLISHED, attempt
                    landed = by_attempt[attempt.attempt_id]
                    assert attempt.evidence.endswith(
                        f"{topic}/{landed.partition}@{landed.offset}"), attempt
                elif attempt.state == AttemptState.UNKNOWN:
                    assert attempt.evidence.startswith("recovery: "), attempt
            for m in (m for m in deliver if route.shard_for(m) == shard):
                message = find_message(store, m)
                assert message is not None, f"{m}: scheduled, receipted, and lost"
                states[message.state] += 1
                mine = [a for a in attempts if a.delay_message_id == m]
                if message.state == MessageState.PUBLISHED:
                    (won,) = [a for a in mine if a.state == AttemptState.PUBLISHED]
                    assert copies[m] == 1, f"{m}: PUBLISHED, {copies[m]} records on the topic"
                    assert won.attempt_id in by_attempt, f"{m}: published attempt not on topic"
                else:
                    assert message.state == MessageState.UNCERTAIN, (
                        f"{m}: {message.state} after everything was due ({mine})")
                    assert any(a.state == AttemptState.UNKNOWN for a in mine), mine
                    assert copies[m] == 0, f"{m}: UNCERTAIN, {copies[m]} records on the topic"
    print(f"\nkilled after {published_at_kill} publishes; states {dict(states)}; settled by "
          f"evidence scan {by_scan}; topic records {len(topic_records)}; log ends "
          f"{ {str(s): e for s, e in ends.items()} }")
    assert sum(states.values()) == SCHEDULES
    assert states[MessageState.UNCERTAIN] + by_scan > 0, (
        "the kill hit no attempt in flight: retune KILL_AFTER_PUBLISHED")
