"""A destination broker that stops mid-run, on real servers.

The route is on the embedded file log, so only the destination broker goes away. Lane
``kafka_lane`` publishes to the session's Kafka, lane ``local`` to a file. While a trickle
of due messages is being published, Kafka is stopped (``scripts/services down kafka``): the
Kafka lane goes NOT READY, attempts that were handed to the producer end UNKNOWN (never
NOT_PUBLISHED), attempts declined before any send are NOT_PUBLISHED and back on the
timeline, and the file lane keeps publishing on time. Kafka is started again: the lane
becomes READY, the rest is published, and evidence recovery settles every UNKNOWN attempt
whose record did land.

An UNKNOWN attempt is never retried, so a message whose record never landed stays UNCERTAIN
(for an operator): the consumer sees every PUBLISHED message, none of those. The engine
SIGKILLed while it publishes to Kafka is ``test_kafka_publish_kill.py``.

Kafka is always started again before the engine stops, so later tests have it; every wait
polls a condition under a deadline. The Kafka lane gets the real adapter with a 4 s
delivery timeout (the default 30 s would only make the test slower), which notes every
publish call made while its lane was NOT READY.

This test found the lane publisher handing requests queued while the lane was READY to a
destination that had failed since: with Kafka down, every message claimed during the first
failed call (100 of 140 here) was produced into a dead broker and ended UNCERTAIN. The
publisher now probes first and declines them (NOT_PUBLISHED LANE_UNAVAILABLE, never handed
to the destination), so they are published after the restart.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.kafka.kafka_destination import KafkaDestination
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.client import Prepared, RouteRef, prepare_cancel, prepare_schedule, queue
from nereus.config import Config
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.process.home_engine import Engine
from nereus.engine.publishing.lane_publisher import LanePublisher
from nereus.layout import HomeLayout
from nereus.records import AttemptState, MessageState
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from nereus.state.values import Attempt
from nereus.views import find_message, open_attempts
from tests.daemon import read_outbox
from tests.integration.attempt_ledger import attempts_of, check_not_published
from tests.integration.broker_homes import kafka_lane, write_home
from tests.integration.engine_harness import file_lane, in_process_engine, lateness_ms
from tests.integration.kafka_service import (  # noqa: F401
    KafkaService,
    kafka_restored,
    kafka_service,
    switch_kafka,
)
from tests.integration.kafka_topic import TopicRecord, read_topic
from tests.integration.shard_logs import ShardLogs
from tests.polling import now_ms, wait_until

# the Kafka lane's delivery timeout: a call in progress when the broker goes away returns
# (UNKNOWN) after this long; the adapter's default, 30 s, would only slow the test
DELIVERY_TIMEOUT_S = 4.0
TRICKLE = 300  # messages, alternating between the two lanes
TRICKLE_SPAN_MS = 6_000
TRICKLE_LEAD_MS = 1_000
CANCELLED = 10  # Kafka-lane messages due last, cancelled at once
PUBLISHED_BEFORE_STOP = 20  # Kafka-lane publishes before the broker is stopped
LOCAL_P99_MS = 1_000

pytestmark = pytest.mark.serial  # it stops the Kafka broker every Kafka test shares


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


# set up: the home and the trickle ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Trickle:
    """The home and what the test schedules in it: a trickle of due messages alternating
    between the two lanes, the Kafka-lane ones due last cancelled at once."""

    home: Path
    config: Config
    bootstrap: str
    topic: str
    deliver: dict[str, int]  # delay message id -> deliverAt (ms)
    lane_of: dict[str, str]
    cancelled: set[str]

    @property
    def shards(self) -> list[ShardId]:
        return [ShardId("default", p) for p in range(self.config.routes["default"].partitions)]

    def on_lane(self, lane: str) -> list[str]:
        return [m for m in self.deliver if self.lane_of[m] == lane]

    def commands(self) -> list[Prepared]:
        route = RouteRef("default", self.config.routes["default"].partitions)
        prepared = [prepare_schedule(route, command_id=f"s-{m}", delay_message_id=m,
                                     lane=self.lane_of[m], deliver_at_ms=at, key=m,
                                     payload=m.encode()) for m, at in self.deliver.items()]
        return prepared + [prepare_cancel(route, command_id=f"c-{m}", delay_message_id=m)
                           for m in sorted(self.cancelled)]


def plan_trickle(home: Path, bootstrap: str) -> Trickle:
    topic = f"faults-{uuid.uuid4().hex[:10]}"
    config = write_home(home, '[routes.default]\nlog = "file"\npartitions = 2\n',
                        kafka_lane("kafka_lane", bootstrap, topic),
                        file_lane("local", "outbox/local.jsonl"),
                        "[engine]\nevidence_interval_s = 1\n")
    start = now_ms()
    deliver = {f"t{n:03d}-{'k' if n % 2 == 0 else 'l'}":
               start + TRICKLE_LEAD_MS + n * TRICKLE_SPAN_MS // TRICKLE
               for n in range(TRICKLE)}
    lane_of = {m: "kafka_lane" if m.endswith("-k") else "local" for m in deliver}
    cancelled = set(sorted(m for m in deliver if lane_of[m] == "kafka_lane")[-CANCELLED:])
    return Trickle(home, config, bootstrap, topic, deliver, lane_of, cancelled)


@contextlib.contextmanager
def trickle_engine(trickle: Trickle, destination: WatchedKafka) -> Iterator[Engine]:
    """The engine on the trickle's home with ``destination`` as its Kafka lane, the trickle
    queued; on the way out Kafka runs again before the engine stops."""
    config = trickle.config
    with in_process_engine(trickle.home, config=config,
                           settings=EngineSettings.from_config(config.engine),
                           destinations={"kafka_lane": destination}) as harness:
        engine = harness.engine
        destination.publisher = engine.publishers["kafka_lane"]
        with ShardLogs(lambda shard: open_shard_log(config.routes["default"], shard,
                                                    trickle.home)) as logs:
            queue(trickle.commands(), logs)
            with kafka_restored():
                yield engine


def lane_counts(engine: Engine, lane: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for loop in engine.shards.values():
        counts.update(loop.lanes()[lane].counts)
    return counts


# drive the fault: Kafka down while its lane publishes, then up again -----------------------
@dataclass(slots=True)
class Outage:
    """What the lanes did while the broker was down, and when things happened (monotonic)."""

    local_at_stop: int = 0  # file-lane lines when Kafka was stopped
    local_while_down: int = 0  # ... and once everything was due, Kafka still down
    reason: str | None = None  # why the Kafka lane said NOT READY
    stuck: Counter[str] = field(default_factory=Counter)  # Kafka-lane states while down
    timeline: dict[str, float] = field(default_factory=dict)


def stop_kafka_under_the_lane(engine: Engine, trickle: Trickle) -> Outage:
    """Kafka stopped once its lane has published a few: the lane goes NOT READY, the file
    lane does not wait, and the broker stays down until everything is due."""
    outbox = HomeLayout(trickle.home).outbox / "local.jsonl"
    kafka_lane = engine.publishers["kafka_lane"]
    outage = Outage()
    wait_until("the Kafka lane publishing", lambda: kafka_lane.published
               >= PUBLISHED_BEFORE_STOP, 20.0, seen=lambda: kafka_lane.published)
    outage.timeline["stop"] = time.monotonic()
    outage.local_at_stop = len(read_outbox(outbox))
    switch_kafka("down")
    outage.timeline["stopped"] = time.monotonic()
    wait_until("the Kafka lane NOT READY", lambda: not kafka_lane.ready,
               DELIVERY_TIMEOUT_S + 15.0, seen=lambda: kafka_lane.not_ready_reason)
    outage.timeline["not_ready"] = time.monotonic()
    outage.reason = kafka_lane.not_ready_reason
    assert outage.reason, "NOT READY names its reason"
    assert engine.publishers["local"].ready
    # the broker stays down until everything is due: the file lane must not wait
    last_due = max(trickle.deliver.values())
    wait_until("everything due", lambda: now_ms() > last_due + 300, 30.0)
    outage.local_while_down = len(read_outbox(outbox))
    assert not kafka_lane.ready, "the broker is still down"
    outage.stuck = lane_counts(engine, "kafka_lane")
    return outage


def restart_kafka_and_settle(engine: Engine, trickle: Trickle, outage: Outage) -> None:
    """Kafka started again: the lane READY, nothing of it left SCHEDULED or PUBLISHING, and
    no UNKNOWN attempt whose record landed left unsettled by evidence recovery."""
    kafka_lane = engine.publishers["kafka_lane"]
    switch_kafka("up")
    outage.timeline["restarted"] = time.monotonic()
    wait_until("the Kafka lane READY again", lambda: kafka_lane.ready, 30.0,
               seen=lambda: kafka_lane.not_ready_reason)
    outage.timeline["ready"] = time.monotonic()

    def kafka_lane_settled() -> bool:
        counts = lane_counts(engine, "kafka_lane")
        return not counts.get(MessageState.SCHEDULED) and \
            not counts.get(MessageState.PUBLISHING)

    wait_until("no Kafka-lane message left SCHEDULED or PUBLISHING", kafka_lane_settled,
               40.0, seen=lambda: lane_counts(engine, "kafka_lane"))

    def landed_unknown() -> set[str]:
        unknown = {a.attempt_id for loop in engine.shards.values()
                   for a in open_attempts(loop.store, state=AttemptState.UNKNOWN)}
        return unknown & {r.attempt_id for r in read_topic(trickle.bootstrap, trickle.topic)}

    wait_until("evidence recovery settling every UNKNOWN attempt that landed",
               lambda: not landed_unknown(), 30.0, seen=landed_unknown)
    outage.timeline["settled"] = time.monotonic()


# check what was published --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Landed:
    """What the broker holds and what the shards say, once the engine has stopped."""

    records: list[TopicRecord]
    states: dict[str, MessageState]
    attempts: list[Attempt]

    @property
    def on_topic(self) -> set[str]:
        return {r.attempt_id for r in self.records}


def read_what_landed(trickle: Trickle) -> Landed:
    states: dict[str, MessageState] = {}
    attempts: list[Attempt] = []
    for shard in trickle.shards:
        with ShardStore.open(HomeLayout(trickle.home).shard_state(shard),
                             read_only=True) as store:
            attempts += attempts_of(store)
            for m in trickle.deliver:
                message = find_message(store, m)
                if message is not None:
                    states[m] = message.state
    return Landed(read_topic(trickle.bootstrap, trickle.topic), states, attempts)


def percentile_99(ordered: list[int]) -> int:
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def check_file_lane(trickle: Trickle, outage: Outage) -> list[int]:
    """Every file-lane message once, on time, and the lane kept going while Kafka was down;
    returns the lateness of its lines (ms, sorted)."""
    local = read_outbox(HomeLayout(trickle.home).outbox / "local.jsonl")
    local_ids = Counter(line["delay_message_id"] for line in local)
    assert set(local_ids) == set(trickle.on_lane("local")) and max(local_ids.values()) == 1
    assert outage.local_while_down > outage.local_at_stop + 20, (
        f"the file lane stalled with Kafka down: {outage.local_at_stop} -> "
        f"{outage.local_while_down} lines")
    late = sorted(lateness_ms(line) for line in local)
    p99 = percentile_99(late)
    assert late[0] >= 0 and p99 < LOCAL_P99_MS, f"file lane lateness p99 {p99} ms (min {late[0]})"
    return late


def check_kafka_lane(trickle: Trickle, landed: Landed) -> None:
    """Nothing lost, nothing early, duplicates only after an UNKNOWN attempt, and every
    attempt settled by an evidence scan PUBLISHED."""
    states, copies = landed.states, Counter(r.delay_message_id for r in landed.records)
    by_message: dict[str, list[Attempt]] = {}
    for attempt in landed.attempts:
        by_message.setdefault(attempt.delay_message_id, []).append(attempt)
    was_unknown = {a.delay_message_id for a in landed.attempts
                   if a.state == AttemptState.UNKNOWN or a.evidence.startswith("evidence scan:")}
    for attempt in landed.attempts:
        if attempt.evidence.startswith("evidence scan:"):
            assert attempt.state == AttemptState.PUBLISHED, attempt
            assert states[attempt.delay_message_id] == MessageState.PUBLISHED
    for m in trickle.on_lane("kafka_lane"):
        if m in trickle.cancelled:
            assert states[m] == MessageState.CANCELLED and copies[m] == 0, m
            continue
        assert states[m] in (MessageState.PUBLISHED, MessageState.UNCERTAIN), (
            f"{m}: {states[m]} ({by_message.get(m)})")
        if states[m] == MessageState.PUBLISHED:
            assert copies[m] >= 1, f"{m}: PUBLISHED but not on the topic"
        else:
            assert copies[m] == 0, f"{m}: UNCERTAIN although its record landed"
        assert copies[m] <= 1 or m in was_unknown, f"{m}: {copies[m]} copies"
    early = [(r.delay_message_id, trickle.deliver[r.delay_message_id] - r.timestamp_ms)
             for r in landed.records if r.timestamp_ms < trickle.deliver[r.delay_message_id]]
    assert not early, f"records stamped before deliverAt (ms early): {early[:5]}"


# the test ------------------------------------------------------------------------------
def test_destination_broker_stops_mid_run(tmp_path: Path,
                                          kafka_service: KafkaService) -> None:  # noqa: F811
    """Kafka stops while its lane publishes: the lane goes NOT READY, in-flight attempts end
    UNKNOWN (never NOT_PUBLISHED), the file lane stays on time; after a restart the rest is
    published and evidence settles every UNKNOWN attempt whose record landed."""
    trickle = plan_trickle(tmp_path / "home", kafka_service.require())
    destination = WatchedKafka("kafka_lane", trickle.bootstrap, trickle.topic,
                               timeout_s=DELIVERY_TIMEOUT_S)
    with trickle_engine(trickle, destination) as engine:
        outage = stop_kafka_under_the_lane(engine, trickle)
        restart_kafka_and_settle(engine, trickle, outage)

    landed = read_what_landed(trickle)
    assert not destination.calls_while_not_ready, (
        f"a NOT READY lane handed batches to its destination (size, reason): "
        f"{destination.calls_while_not_ready[:3]}")
    declined = check_not_published(landed.attempts, landed.on_topic)
    late = check_file_lane(trickle, outage)
    check_kafka_lane(trickle, landed)
    kafka_states = Counter(landed.states[m] for m in trickle.on_lane("kafka_lane"))
    scanned = [a for a in landed.attempts if a.evidence.startswith("evidence scan:")]
    timeline = outage.timeline
    print(f"\nKafka lane: {dict(kafka_states)}; NOT_PUBLISHED outcomes {declined}; "
          f"settled by evidence scan {len(scanned)}; while down {dict(outage.stuck)}; "
          f"NOT READY {timeline['not_ready'] - timeline['stopped']:.1f} s after the broker "
          f"stopped ({outage.reason}); READY {timeline['ready'] - timeline['restarted']:.1f} s "
          f"after it restarted; file lane {len(late)} lines, lateness p99 "
          f"{percentile_99(late)} ms max {late[-1]} ms")
    assert kafka_states[MessageState.PUBLISHED] > PUBLISHED_BEFORE_STOP, kafka_states
