"""A Kafka topic made, or read back whole, for the tests: ``create_topic`` makes one with
exactly the config given and waits until the broker's metadata has it; ``read_topic`` reads
what a destination published, every record from the beginning to the topic's current end,
by a consumer of its own, with the delay message and attempt ids the records' headers
carry."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from nereus.adapters.backends.kafka.kafka_evidence import ATTEMPT_ID_HEADER, DELAY_MESSAGE_ID_HEADER
from tests.integration.kafka_service import text_headers
from tests.polling import wait_until


def create_topic(bootstrap: str, topic: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    """Create ``topic`` (behind any log's or destination's back) and wait until the broker's
    metadata lists every partition with a leader: the create call returns once the
    controller made it, and a client that asks before the metadata has it is told the topic
    does not exist."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # confluent_kafka.admin's types hide it

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(10)

    def listed() -> bool:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        return found is not None and found.error is None and len(found.partitions) == \
            partitions and all(p.leader >= 0 for p in found.partitions.values())
    wait_until(f"topic {topic} in the broker's metadata", listed, 20)


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
