"""Fetch the destination record an operator's evidence reference names, to verify it.

``attempt resolve --published --evidence REF`` names where the message landed, in the form
the destinations report evidence:

* ``kafka:TOPIC/PARTITION@OFFSET``
* ``pulsar:TOPIC@LEDGER:ENTRY:PARTITION`` (partition -1: a topic that is not partitioned)
* ``PATH@OFFSET`` (a file destination's line at that byte offset)

``fetch_evidence`` reads that one record and returns the attempt id and evidence MAC it
carries; the caller checks them against the attempt (``nereus.evidence_mac``). Anything
else is free text, which proves nothing by itself (``--unverified``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from nereus.config import LaneSettings
from nereus.errors import NotFound, UsageError

_KAFKA = re.compile(r"^kafka:(?P<topic>[^/@\s]+)/(?P<partition>\d+)@(?P<offset>\d+)$")
_PULSAR = re.compile(r"^pulsar:(?P<topic>\S+)@(?P<ledger>\d+):(?P<entry>\d+):"
                     r"(?P<partition>-?\d+)$")
_FILE = re.compile(r"^(?P<path>/\S+)@(?P<offset>\d+)$")
FETCH_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class Fetched:
    """What the referenced record carries."""

    where: str
    attempt_id: str | None
    mac: str | None


def is_reference(text: str) -> bool:
    """Whether ``text`` names a destination record (rather than being free text)."""
    text = text.strip()
    return bool(_KAFKA.match(text) or _PULSAR.match(text) or _FILE.match(text))


def fetch_evidence(reference: str, lane: LaneSettings) -> Fetched:
    """The attempt id and MAC of the record ``reference`` names, read from ``lane``'s
    destination (its bootstrap or service URL). Raises NotFound when there is no record."""
    text = reference.strip()
    if (found := _KAFKA.match(text)) is not None:
        return _kafka(text, lane, found["topic"], int(found["partition"]),
                      int(found["offset"]))
    if (found := _PULSAR.match(text)) is not None:
        return _pulsar(text, lane, found["topic"], int(found["ledger"]), int(found["entry"]),
                       int(found["partition"]))
    if (found := _FILE.match(text)) is not None:
        return _file(text, Path(found["path"]), int(found["offset"]))
    raise UsageError(f"{reference!r} is not a destination reference",
                     hint="kafka:TOPIC/PARTITION@OFFSET, pulsar:TOPIC@LEDGER:ENTRY:PARTITION "
                     "or PATH@OFFSET; free text needs --unverified")


def _kafka(where: str, lane: LaneSettings, topic: str, partition: int, offset: int) -> Fetched:
    from confluent_kafka import Consumer, TopicPartition

    from nereus.adapters.backends.kafka.kafka_client import (
        CLOSE_WAIT_S,
        client_config,
        close_consumer,
    )
    from nereus.adapters.backends.kafka.kafka_evidence import (
        ATTEMPT_ID_HEADER,
        EVIDENCE_MAC_HEADER,
    )
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
            return Fetched(where, _text(headers.get(ATTEMPT_ID_HEADER)),
                           _text(headers.get(EVIDENCE_MAC_HEADER)))
        raise NotFound(f"{where}: the record could not be read within {FETCH_TIMEOUT_S:g}s")
    finally:
        close_consumer(consumer, f"the evidence check of {where}", CLOSE_WAIT_S)


def _pulsar(where: str, lane: LaneSettings, topic: str, ledger: int, entry: int,
            partition: int) -> Fetched:
    import pulsar

    from nereus.adapters.backends.pulsar.pulsar_client import make_client, partition_topic
    from nereus.adapters.backends.pulsar.pulsar_destination import (
        PROPERTY_ATTEMPT_ID,
        PROPERTY_EVIDENCE_MAC,
    )
    from nereus.adapters.backends.shardlog.factory import DEFAULT_PULSAR_URL

    client = make_client(lane.service_url or DEFAULT_PULSAR_URL, timeout_s=FETCH_TIMEOUT_S)
    try:
        name = topic if partition < 0 else partition_topic(topic, partition)
        reader = client.create_reader(name, pulsar.MessageId(max(partition, -1), ledger, entry,
                                                             -1),
                                      start_message_id_inclusive=True)
        try:
            message = reader.read_next(timeout_millis=int(FETCH_TIMEOUT_S * 1000))
        except pulsar.Timeout:
            raise NotFound(f"{where}: no such message") from None
        finally:
            reader.close()
        found = message.message_id()
        if (found.ledger_id(), found.entry_id()) != (ledger, entry):
            raise NotFound(f"{where}: no such message (the next one is "
                           f"{found.ledger_id()}:{found.entry_id()})")
        properties = message.properties()
        return Fetched(where, properties.get(PROPERTY_ATTEMPT_ID),
                       properties.get(PROPERTY_EVIDENCE_MAC))
    finally:
        client.close()


def _file(where: str, path: Path, offset: int) -> Fetched:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            line = handle.readline()
    except OSError as exc:
        raise NotFound(f"{where}: {exc.strerror}") from None
    try:
        record = json.loads(line)
    except ValueError:
        raise NotFound(f"{where}: no complete line starts at byte {offset}") from None
    if not isinstance(record, dict):
        raise NotFound(f"{where}: the line is not a published record")
    return Fetched(where, _text(record.get("attempt_id")), _text(record.get("mac")))


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None
