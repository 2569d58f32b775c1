"""End to end on real brokers: Kafka -> Kafka, Pulsar -> Pulsar (with deliver-at handoff)
and Kafka -> Pulsar. A consumer on the destination sees each non-cancelled message once,
never before its deliverAt (by the test's own clock)."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nereus.adapters.backends.kafka.kafka_evidence import DELAY_MESSAGE_ID_HEADER
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.client import RouteRef, prepare_cancel, prepare_schedule, queue
from nereus.layout import HomeLayout
from nereus.records import MessageState
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from nereus.views import find_message
from tests.integration.broker_homes import kafka_lane, kafka_route, write_home
from tests.integration.engine_harness import in_process_engine
from tests.integration.kafka_service import (  # noqa: F401
    KafkaService,
    kafka_service,
    text_headers,
)
from tests.integration.pulsar_service import PulsarService, pulsar_service  # noqa: F401
from tests.integration.shard_logs import ShardLogs
from tests.polling import now_ms

if TYPE_CHECKING:
    from confluent_kafka import Message

Consume = Callable[[set[str], float], dict[str, list[int]]]


def delay_message_id(message: Message) -> str:
    """The delay message id a destination record names (a record without one is counted
    under a name no message has, so it shows up as unexpected)."""
    return text_headers(message).get(DELAY_MESSAGE_ID_HEADER, "<no delay message id header>")


def kafka_consumer(bootstrap: str, topic: str) -> Consume:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])

    def consume(expected: set[str], deadline_s: float) -> dict[str, list[int]]:
        seen: dict[str, list[int]] = {}
        end = time.monotonic() + deadline_s
        try:
            while time.monotonic() < end and not expected <= seen.keys():
                message = consumer.poll(0.1)
                if message is None or message.error():
                    continue
                seen.setdefault(delay_message_id(message), []).append(now_ms())
            settle = time.monotonic() + 1.0  # anything duplicated or late shows up now
            while time.monotonic() < settle:
                message = consumer.poll(0.1)
                if message is not None and not message.error():
                    seen.setdefault(delay_message_id(message), []).append(now_ms())
        finally:
            consumer.close()
        return seen

    return consume


def pulsar_consumer(service_url: str, topic: str) -> Consume:
    import pulsar

    client = pulsar.Client(service_url)
    consumer = client.subscribe(topic, f"e2e-{uuid.uuid4().hex[:8]}",
                                consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)

    def consume(expected: set[str], deadline_s: float) -> dict[str, list[int]]:
        seen: dict[str, list[int]] = {}
        end = time.monotonic() + deadline_s
        try:
            while time.monotonic() < end:
                try:
                    message = consumer.receive(timeout_millis=100)
                except Exception:
                    quiet = not any(now_ms() - v[-1] < 1000 for v in seen.values())
                    if expected <= seen.keys() and quiet:
                        break
                    continue
                mid = message.properties()["nereus-delay-message-id"]
                seen.setdefault(mid, []).append(now_ms())
                consumer.acknowledge(message)
        finally:
            client.close()
        return seen

    return consume


def run_end_to_end(home: Path, sections: Sequence[str], lane: str, consume: Consume, *,
                   count: int = 120, seed: int = 3) -> None:
    rng = random.Random(seed)
    config = write_home(home, *sections)
    route_settings = config.routes["default"]
    route = RouteRef("default", route_settings.partitions)
    with in_process_engine(home, config=config):
        base = now_ms()
        deliver = {f"m{n}-{uuid.uuid4().hex[:6]}": base + rng.randint(800, 3_500)
                   for n in range(count)}
        # no action time: applied, it is deliverAt less the lane's replicated handoff lead
        prepared = [prepare_schedule(route, command_id=f"s-{mid}", delay_message_id=mid,
                                     lane=lane, deliver_at_ms=at, key=mid,
                                     payload=mid.encode())
                    for mid, at in deliver.items()]
        cancelled = set(rng.sample(sorted(deliver), count // 6))
        prepared += [prepare_cancel(route, command_id=f"c-{mid}", delay_message_id=mid)
                     for mid in sorted(cancelled)]
        with ShardLogs(lambda shard: open_shard_log(route_settings, shard, home)) as logs:
            queue(prepared, logs)
        survivors = set(deliver) - cancelled
        seen = consume(survivors, 45.0)
    states = {}
    for partition in range(route_settings.partitions):
        with ShardStore.open(HomeLayout(home).shard_state(ShardId("default", partition)),
                             read_only=True) as store:
            for mid in deliver:
                message = find_message(store, mid)
                if message is not None:
                    states[mid] = message.state
    lost_cancels = {m for m in cancelled if states[m] != MessageState.CANCELLED}
    assert len(lost_cancels) <= 2, "cancels were queued right after the schedules"
    expected = survivors | lost_cancels
    assert set(seen) == expected, (f"missing {sorted(expected - set(seen))[:5]}, "
                                   f"unexpected {sorted(set(seen) - expected)[:5]}")
    duplicates = {m: t for m, t in seen.items() if len(t) > 1}
    assert duplicates == {}, f"delivered more than once: {list(duplicates)[:5]}"
    early = {m: deliver[m] - t[0] for m, t in seen.items() if t[0] < deliver[m]}
    assert early == {}, f"seen before deliverAt (ms early): {early}"


def test_kafka_to_kafka(tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Command Topic on Kafka, destination topic on Kafka."""
    bootstrap = kafka_service.require()
    run = uuid.uuid4().hex[:8]
    config = [kafka_route(bootstrap, f"nereus.e2e-{run}.commands", 2),
              kafka_lane("out", bootstrap, f"e2e-out-{run}")]
    consume = kafka_consumer(bootstrap, f"e2e-out-{run}")
    run_end_to_end(tmp_path / "home", config, "out", consume)


def test_pulsar_to_pulsar_with_deliver_at_handoff(tmp_path: Path,
                                                  pulsar_service: PulsarService) -> None:  # noqa: F811
    """Command Topic on Pulsar; the lane hands messages to Pulsar early with deliver_at."""
    endpoint = pulsar_service.require()
    run = uuid.uuid4().hex[:8]
    config = f"""
[routes.default]
log = "pulsar"
service_url = "{endpoint.service_url}"
admin_url = "{endpoint.admin_url}"
topic = "nereus-e2e-{run}-commands"
partitions = 2

[lanes.out]
destination = "pulsar"
service_url = "{endpoint.service_url}"
topic = "persistent://public/default/e2e-out-{run}"
handoff = "deliver_at"
lead_ms = 700
"""
    consume = pulsar_consumer(endpoint.service_url, f"persistent://public/default/e2e-out-{run}")
    run_end_to_end(tmp_path / "home", [config], "out", consume, count=80)


def test_kafka_to_pulsar(tmp_path: Path, kafka_service: KafkaService,  # noqa: F811
                         pulsar_service: PulsarService) -> None:  # noqa: F811
    """Command Topic on Kafka, destination on Pulsar."""
    bootstrap = kafka_service.require()
    endpoint = pulsar_service.require()
    run = uuid.uuid4().hex[:8]
    config = [kafka_route(bootstrap, f"nereus.e2e-{run}.commands", 1), f"""[lanes.out]
destination = "pulsar"
service_url = "{endpoint.service_url}"
topic = "persistent://public/default/e2e-kp-{run}"
"""]
    consume = pulsar_consumer(endpoint.service_url, f"persistent://public/default/e2e-kp-{run}")
    run_end_to_end(tmp_path / "home", config, "out", consume, count=60)
