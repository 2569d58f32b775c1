"""The Kafka readiness probe: produce one message to ``nereus-probe`` and consume it back.

Needs ``confluent-kafka``, imported where used.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import TYPE_CHECKING

from probe_support import HOST, env

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message


def kafka_round_trip(budget: float) -> str:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    bootstrap = f"{HOST}:{env('NEREUS_KAFKA_PORT', '9092')}"
    # a secured broker's settings (scripts/services sets them for kafka-secure)
    secured = json.loads(os.environ.get("NEREUS_KAFKA_PROBE_CONFIG") or "{}")
    topic = "nereus-probe"
    payload = f"probe-{uuid.uuid4()}".encode()
    # more listeners of the same broker, each to take one message too ({"PORT": settings})
    for port, settings in json.loads(os.environ.get("NEREUS_KAFKA_PROBE_ALSO") or "{}").items():
        produce(f"{HOST}:{port}", settings, topic, payload, budget)
    partition, offset = produce(bootstrap, secured, topic, payload, budget)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"nereus-probe-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "log_level": 0,
            **secured,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            got = consumer.poll(0.5)
            if got is None:
                continue
            if got.error():
                raise KafkaException(got.error())
            if got.value() == payload:
                return (
                    f"kafka ok: {bootstrap} topic={topic} partition={partition} "
                    f"offset={offset} round trip"
                )
        raise RuntimeError("produced message not consumed back in time")
    finally:
        consumer.close()


def produce(bootstrap: str, secured: dict[str, object], topic: str, payload: bytes,
            budget: float) -> tuple[int, int]:
    """Deliver ``payload`` to ``topic`` at ``bootstrap``; its (partition, offset)."""
    from confluent_kafka import Producer

    timeout_ms = max(1000, int(budget * 1000))
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": min(timeout_ms, 5000),
            "log_level": 0,
            **secured,
        }
    )
    reports: list[tuple[KafkaError | None, Message]] = []  # the delivery report

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        reports.append((err, msg))

    producer.produce(topic, payload, on_delivery=on_delivery)
    left = producer.flush(budget)
    err = reports[0][0] if reports else None
    if left or err is not None or not reports:
        raise RuntimeError(f"produce to {bootstrap} failed: {err or 'not delivered in time'}")
    msg = reports[0][1]
    partition, offset = msg.partition(), msg.offset()
    if partition is None or offset is None:
        raise RuntimeError(f"produce failed: delivered to partition {partition} offset {offset}")
    return partition, offset
