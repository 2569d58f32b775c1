"""What marks a record the Kafka destination published, and finding records by those marks.

Every published record carries three headers after the template's own (a template header
with one of these names is dropped, so consumers and the scan see exactly one of each):
``nereus-delay-message-id``, ``nereus-attempt-id`` and ``nereus-evidence-mac``. Its
evidence is ``kafka:<topic>/<partition>@<offset>``.

``scan_topic`` looks for records by their ``nereus-attempt-id`` header (and the MAC the
caller expects for that attempt), to resolve UNKNOWN attempts with evidence; not finding
one proves nothing. ``confluent_kafka`` is imported inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from nereus.adapters.backends.destination.evidence_fetch import (
    FETCH_TIMEOUT_S,
    Fetched,
    text_of,
)
from nereus.adapters.backends.kafka.kafka_client import (
    CLOSE_WAIT_S,
    UNREACHABLE_ERRORS,
    client_config,
    close_consumer,
    translate,
    unreachable,
)
from nereus.config import LaneSettings
from nereus.errors import NotFound
from nereus.evidence_mac import ExpectedMac, mac_accepted

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

DELAY_MESSAGE_ID_HEADER: Final = "nereus-delay-message-id"
ATTEMPT_ID_HEADER: Final = "nereus-attempt-id"
EVIDENCE_MAC_HEADER: Final = "nereus-evidence-mac"
RESERVED_HEADERS: Final = frozenset({DELAY_MESSAGE_ID_HEADER, ATTEMPT_ID_HEADER,
                                     EVIDENCE_MAC_HEADER})

_SCAN_BATCH: Final = 500
_SCAN_POLL_S: Final = 0.2


def evidence_of(topic: str, partition: int | None, offset: int | None) -> str:
    return f"kafka:{topic}/{partition}@{offset}"


def scan_topic(
    bootstrap: str, client_id: str, topic: str, timeout_s: float,
    wanted: Mapping[str, ExpectedMac], since_ms: int, until_ms: int, *, committed: bool = False,
) -> dict[str, str]:
    """attempt id -> evidence for the records of ``topic`` stamped from ``since_ms`` to
    ``until_ms`` that carry one of ``wanted``'s attempt ids *and* the MAC ``wanted`` expects
    for it; with ``committed``, only committed ones (read_committed, up to the last
    stable offset: ``kafka_transactions``).

    The window is found with the topic's time index (offsets_for_times). Raises
    ``ServiceUnreachable`` when the broker does not answer or the scan does not finish
    within ``timeout_s``: a partial scan is not an answer.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    if not wanted:
        return {}
    consumer = Consumer(client_config(bootstrap, client_id, {
        "group.id": f"nereus-scan-{topic}",  # never commits
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed" if committed else "read_uncommitted",
        "auto.offset.reset": "earliest",
    }))
    deadline = time.monotonic() + timeout_s
    try:
        scan = _Scan(topic, wanted, _ranges(consumer, bootstrap, topic, timeout_s, since_ms,
                                            until_ms))
        if scan.ranges:
            consumer.assign([TopicPartition(topic, p, start)
                             for p, (start, _) in scan.ranges.items()])
        while scan.pending and len(scan.found) < len(scan.by_id):
            if time.monotonic() >= deadline:
                raise unreachable(
                    bootstrap, f"scanning topic {topic}",
                    f"partitions {sorted(scan.pending)} not read to the end within "
                    f"{timeout_s:g}s")
            for msg in consumer.consume(_SCAN_BATCH, timeout=_SCAN_POLL_S):
                scan.take(msg)
        return scan.found
    except KafkaException as exc:
        raise translate(exc, bootstrap, f"scanning topic {topic}") from None
    finally:
        close_consumer(consumer, f"the scan of {topic}", min(timeout_s, CLOSE_WAIT_S))


def _ranges(
    consumer: Consumer, bootstrap: str, topic: str, timeout_s: float, since_ms: int,
    until_ms: int,
) -> dict[int, tuple[int, int]]:
    """partition -> [first offset stamped >= since_ms, end offset) to read."""
    from confluent_kafka import TopicPartition

    metadata = consumer.list_topics(topic=topic, timeout=timeout_s)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        detail = found.error.str() if found is not None and found.error else "no metadata"
        if found is not None and found.error and found.error.name() in UNREACHABLE_ERRORS:
            raise unreachable(bootstrap, f"metadata of topic {topic}", detail)
        raise NotFound(f"Kafka at {bootstrap}: topic {topic}: {detail}")
    partitions = sorted(found.partitions)
    starts = consumer.offsets_for_times(
        [TopicPartition(topic, p, since_ms) for p in partitions], timeout=timeout_s)
    stops = consumer.offsets_for_times(
        [TopicPartition(topic, p, until_ms + 1) for p in partitions], timeout=timeout_s)
    ranges = {}
    for start, stop in zip(starts, stops, strict=True):
        if start.offset < 0:
            continue  # nothing stamped at or after since_ms
        _, high = consumer.get_watermark_offsets(
            TopicPartition(topic, start.partition), timeout=timeout_s, cached=False)
        end = high if stop.offset < 0 else min(high, stop.offset)
        if start.offset < end:
            ranges[start.partition] = (start.offset, end)
    return ranges


class _Scan:
    """One scan's progress: the ranges still being read and what was found."""

    def __init__(
        self, topic: str, wanted: Mapping[str, ExpectedMac], ranges: dict[int, tuple[int, int]]
    ) -> None:
        self.topic = topic
        self.wanted = wanted
        self.by_id = {a.encode(): a for a in wanted}
        self.ranges = ranges
        self.pending = set(ranges)
        self.found: dict[str, str] = {}

    def take(self, msg: Message) -> None:
        """Note ``msg``: evidence if it is a wanted attempt's, a partition read to its end."""
        partition = msg.partition()
        if partition is None or partition not in self.pending:
            return
        err = msg.error()
        if err is not None:
            if err.name() == "_PARTITION_EOF":
                self.pending.discard(partition)
                return
            from confluent_kafka import KafkaException

            raise KafkaException(err)
        offset = msg.offset()
        if offset is None:
            return
        if offset >= self.ranges[partition][1]:
            self.pending.discard(partition)
            return
        raw = msg.headers() or []
        headers = dict(raw.items() if isinstance(raw, dict) else raw)
        attempt = headers.get(ATTEMPT_ID_HEADER)
        if isinstance(attempt, bytes) and attempt in self.by_id:
            attempt_id = self.by_id[attempt]
            mac = headers.get(EVIDENCE_MAC_HEADER)
            if isinstance(mac, bytes) and mac_accepted(
                    mac, self.wanted[attempt_id]):
                self.found[attempt_id] = evidence_of(self.topic, partition, offset)
        if offset >= self.ranges[partition][1] - 1:
            self.pending.discard(partition)


def fetch_record(where: str, lane: LaneSettings, topic: str, partition: int,
                 offset: int) -> Fetched:
    """The attempt id and MAC the record at ``topic/partition@offset`` carries (``where``
    names it in errors); NotFound when there is none (``evidence_fetch.fetch_evidence``)."""
    from confluent_kafka import Consumer, TopicPartition

    from nereus.adapters.backends.shardlog.factory import DEFAULT_KAFKA_BOOTSTRAP

    bootstrap = lane.bootstrap or DEFAULT_KAFKA_BOOTSTRAP
    consumer = Consumer(client_config(bootstrap, "nereus-evidence", {
        "group.id": "nereus-evidence-check", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "auto.offset.reset": "error"}))
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=FETCH_TIMEOUT_S, cached=False)
        if not low <= offset < high:
            raise NotFound(f"{where}: Kafka holds offsets {low}..{high - 1} of "
                           f"{topic}/{partition}; there is no record at {offset}")
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + FETCH_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None or msg.offset() != offset:
                continue
            raw = msg.headers() or []
            headers: dict[str, object] = dict(raw.items() if isinstance(raw, dict) else raw)
            return Fetched(where, text_of(headers.get(ATTEMPT_ID_HEADER)),
                           text_of(headers.get(EVIDENCE_MAC_HEADER)))
        raise NotFound(f"{where}: the record could not be read within {FETCH_TIMEOUT_S:g}s")
    finally:
        close_consumer(consumer, f"the evidence check of {where}", CLOSE_WAIT_S)
