"""Scenario 2 of ``bench/brokers.py``: Kafka -> Kafka publishes per second per shard.

Route and lane are on Kafka. M SCHEDULE commands all due at one instant are queued to the
Command Topic (the engine must apply them before that instant, checked); the destination
topic has ``message.timestamp.type = LogAppendTime``, so each record's timestamp is the
broker's receipt. A shard's rate = its records / (its last receipt - its first receipt).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from fire_scenarios import TARGET_RATE_PER_SHARD
from inprocess_engine import (
    Due,
    all_published,
    applied_through,
    message_states,
    new_home,
    now_ms,
    queue_due,
    running,
    wait_for,
)
from nereus.adapters.backends.kafka.kafka_evidence import DELAY_MESSAGE_ID_HEADER
from nereus.config import Config
from nereus.shard import partition_for

if TYPE_CHECKING:
    from confluent_kafka import Message


class KafkaShard(msgspec.Struct, frozen=True):
    published: int
    first_after_due_ms: int
    last_after_due_ms: int
    span_ms: int
    rate_per_s: int
    rate_from_due_per_s: int


class KafkaSection(msgspec.Struct, frozen=True):
    messages: int
    partitions: int
    queued_per_s: int
    applied_before_due: bool
    applied_ms_before_due: int
    records_on_topic: int
    duplicates: int
    states: dict[str, int]
    per_shard: dict[str, KafkaShard]
    rate_per_shard_min: int
    target_per_shard: int
    met: bool


# the destination topic, read back ------------------------------------------------------------
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
                out.append((header_text(message, DELAY_MESSAGE_ID_HEADER),
                            message.timestamp()[1]))
    finally:
        consumer.close()
    if len(out) < max(end, expected):
        print(f"warning: read {len(out)} of {end} records of {topic}", file=sys.stderr)
    return out


def per_shard_receipts(receipts: list[tuple[str, int]], partitions: int,
                       due_ms: int) -> dict[str, KafkaShard]:
    by_shard: dict[str, list[int]] = {}
    for message_id, stamp in receipts:
        by_shard.setdefault(f"default/{partition_for(message_id, partitions)}", []).append(stamp)
    per_shard = {}
    for name, stamps in sorted(by_shard.items()):
        span_ms = max(max(stamps) - min(stamps), 1)
        per_shard[name] = KafkaShard(
            published=len(stamps), first_after_due_ms=min(stamps) - due_ms,
            last_after_due_ms=max(stamps) - due_ms, span_ms=span_ms,
            rate_per_s=round(len(stamps) / span_ms * 1000),
            rate_from_due_per_s=round(len(stamps) / max(max(stamps) - due_ms, 1) * 1000))
    return per_shard


# the engine's run ----------------------------------------------------------------------------
def kafka_home(root: Path, bootstrap: str, command_topic: str, topic: str,
               partitions: int) -> tuple[Path, Config]:
    text = (f'[routes.default]\nlog = "kafka"\nbootstrap = "{bootstrap}"\n'
            f'topic = "{command_topic}"\npartitions = {partitions}\n\n'
            f'[lanes.out]\ndestination = "kafka"\nbootstrap = "{bootstrap}"\ntopic = "{topic}"\n')
    return new_home(root, "kafka-", text)


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaRun:
    """What the engine did with M commands due at ``due_ms``."""

    due_ms: int
    queue_s: float
    applied_before_due: bool
    applied_ms_before_due: int
    states: dict[str, int]


def run_engine(home: Path, config: Config, args: argparse.Namespace) -> KafkaRun:
    count = args.kafka_messages
    with running(home, config) as run:
        engine = run.engine
        due_ms = now_ms() + args.kafka_lead_ms
        began = time.monotonic()
        queue_due(run.logs, (Due(f"k{n:06d}", f"k{n % 97}", due_ms) for n in range(count)),
                  lane="out")
        queue_s = time.monotonic() - began
        ends = run.logs.end_positions()
        applied = wait_for(lambda: applied_through(engine, ends),
                           max(0.0, (due_ms - now_ms()) / 1000)) is not None
        applied_before_due_ms = due_ms - now_ms()
        publisher = engine.publishers["out"]
        done = wait_for(lambda: publisher.published >= count,
                        args.deadline + max(0.0, (due_ms - now_ms()) / 1000), 0.002)
        wait_for(lambda: all_published(engine, count), args.deadline)
        states = message_states(engine)
    if done is None:
        raise SystemExit(f"kafka: only {publisher.published} of {count} published in time")
    return KafkaRun(due_ms=due_ms, queue_s=queue_s, applied_before_due=applied,
                    applied_ms_before_due=applied_before_due_ms, states=states)


def kafka_to_kafka(root: Path, env: dict[str, str], args: argparse.Namespace) -> KafkaSection:
    from nereus.adapters.backends.kafka.kafka_client import ensure_topic

    bootstrap = env["NEREUS_KAFKA_BOOTSTRAP"]
    run_id = uuid.uuid4().hex[:10]
    command_topic, topic = f"nereus.bench-{run_id}.commands", f"bench-out-{run_id}"
    partitions, count = args.kafka_partitions, args.kafka_messages
    ensure_topic(bootstrap, topic, client_id="bench", partitions=1,
                 config={"message.timestamp.type": "LogAppendTime"}, create=True,
                 timeout_s=30)
    home, config = kafka_home(root, bootstrap, command_topic, topic, partitions)
    ran = run_engine(home, config, args)
    receipts = read_receipts(bootstrap, topic, count, args.deadline)
    per_shard = per_shard_receipts(receipts, partitions, ran.due_ms)
    worst = min((s.rate_per_s for s in per_shard.values()), default=0)
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
        delete_kafka_topics(bootstrap, [topic, command_topic])
    return KafkaSection(
        messages=count,
        partitions=partitions,
        queued_per_s=round(count / ran.queue_s),
        applied_before_due=ran.applied_before_due,
        applied_ms_before_due=ran.applied_ms_before_due,
        records_on_topic=len(receipts),
        duplicates=len(receipts) - len({m for m, _ in receipts}),
        states=ran.states,
        per_shard=per_shard,
        rate_per_shard_min=worst,
        target_per_shard=TARGET_RATE_PER_SHARD,
        met=worst >= TARGET_RATE_PER_SHARD,
    )


def delete_kafka_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    with contextlib.suppress(Exception):  # a leftover bench topic harms nothing
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
        for future in admin.delete_topics(topics, operation_timeout=10).values():
            future.result(timeout=15)
