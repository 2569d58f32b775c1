"""Destination consumers: what a downstream reader of each lane saw, and when.

Each consumer runs in a thread of its own (owned by ``Consumers``: started and stopped
together), reads its lane's destination from the beginning and writes one ``Seen`` per
record with the wall-clock time it first read it. Reading is polled (a file every 10 ms,
a broker with a short poll), so a receive time is never earlier than the record's real
arrival: a never-early violation is never the consumer's doing.

* file lanes: the outbox ``<home>/outbox/<lane>.jsonl``, opened once and read through that
  descriptor (a nemesis that moves the path aside does not blind it); a line cut short by
  a crash is skipped (the destination ends it with a newline before its next batch);
* Kafka lanes: every partition of the topic, assigned from the beginning;
* Pulsar lanes: an exclusive subscription from the earliest message.

``evidence(attempt_id)`` answers where a consumer read an attempt, in the form ``attempt
resolve --evidence`` takes (``PATH@OFFSET``, ``kafka:TOPIC/PARTITION@OFFSET``,
``pulsar:TOPIC@LEDGER:ENTRY:PARTITION``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from nereus.timespec import parse_time_ms
from tests.chaos.history import Seen

POLL_S = 0.01


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Sink(Protocol):
    def write(self, entry: Any) -> None: ...


class Consumer(Protocol):
    lane: str

    def poll(self) -> list[Seen]:
        """What arrived since the last poll (may block briefly)."""
        ...

    def close(self) -> None: ...


class FileConsumer:
    """An outbox file, read through one descriptor from byte 0."""

    def __init__(self, lane: str, path: Path) -> None:
        self.lane = lane
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "ab+")  # noqa: SIM115 - closed by close()
        self._read_at = 0  # the next read starts here
        self._line_at = 0  # where the buffered (unfinished) line starts
        self._buffer = b""
        self._order = 0

    def poll(self) -> list[Seen]:
        self._handle.seek(self._read_at)
        data = self._handle.read()
        if not data:
            time.sleep(POLL_S)
            return []
        received = now_ms()
        self._read_at += len(data)
        self._buffer += data
        out: list[Seen] = []
        while b"\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n", 1)
            start = self._line_at
            self._line_at += len(raw) + 1
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a line a crash cut short
            out.append(seen_file_line(self.lane, line, stream=f"file:{self.lane}",
                                      order=self._order, where=f"{self.path}@{start}",
                                      received_ms=received))
            self._order += 1
        return out

    def close(self) -> None:
        self._handle.close()


def seen_file_line(lane: str, line: dict[str, Any], *, stream: str, order: int, where: str,
                   received_ms: int, durable: bool = True) -> Seen:
    """A file destination's JSON line as a ``Seen``."""
    deliver = line.get("deliver_at")
    return Seen(lane=lane, stream=stream, order=order, where=where,
                delay_message_id=str(line.get("delay_message_id")),
                attempt_id=str(line.get("attempt_id")), received_ms=received_ms,
                generation=line.get("generation"), key=line.get("key"),
                deliver_at_ms=parse_time_ms(deliver) if isinstance(deliver, str) else None,
                payload_bytes=len(str(line.get("payload", ""))), durable=durable)


class KafkaConsumer:
    """Every partition of a Kafka topic from its beginning."""

    def __init__(self, lane: str, bootstrap: str, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        from confluent_kafka import Consumer as Client

        self.lane = lane
        self.topic = topic
        self._client = Client({"bootstrap.servers": bootstrap,
                               "group.id": f"chaos-{uuid.uuid4().hex[:8]}",
                               "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        metadata = self._client.list_topics(topic=topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        self._client.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])

    def poll(self) -> list[Seen]:
        from nereus.adapters.backends.kafka.kafka_evidence import (
            ATTEMPT_ID_HEADER,
            DELAY_MESSAGE_ID_HEADER,
        )
        from tests.integration.kafka_service import text_headers

        out: list[Seen] = []
        for message in self._client.consume(500, timeout=0.1):
            partition, offset = message.partition(), message.offset()
            if message.error() is not None or partition is None or offset is None:
                continue
            headers = text_headers(message)
            key = message.key()
            out.append(Seen(lane=self.lane, stream=f"kafka:{self.topic}/{partition}",
                            order=offset, where=f"kafka:{self.topic}/{partition}@{offset}",
                            delay_message_id=headers.get(DELAY_MESSAGE_ID_HEADER, "?"),
                            attempt_id=headers.get(ATTEMPT_ID_HEADER, "?"),
                            received_ms=now_ms(),
                            key=key.decode(errors="replace") if isinstance(key, bytes) else None,
                            payload_bytes=len(message.value() or b"")))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()


class PulsarConsumer:
    """A Pulsar topic from its earliest message (an exclusive subscription of its own)."""

    def __init__(self, lane: str, service_url: str, topic: str) -> None:
        import pulsar

        from nereus.adapters.backends.pulsar.pulsar_client import make_client

        self.lane = lane
        self.topic = topic
        self._client = make_client(service_url, timeout_s=10)  # its log to /dev/null
        self._consumer = self._client.subscribe(
            topic, f"chaos-{uuid.uuid4().hex[:8]}", consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Earliest)
        self._order = 0

    def poll(self) -> list[Seen]:
        from nereus.adapters.backends.pulsar.pulsar_evidence import (
            PROPERTY_ATTEMPT_ID,
            PROPERTY_DELAY_MESSAGE_ID,
        )

        try:
            message = self._consumer.receive(timeout_millis=100)
        except Exception:  # a timeout is how the client says "nothing yet"
            return []
        received = now_ms()
        properties = message.properties()
        mid = message.message_id()
        where = (f"pulsar:{self.topic}@{mid.ledger_id()}:{mid.entry_id()}:"
                 f"{mid.partition()}")
        seen = Seen(lane=self.lane, stream=f"pulsar:{self.topic}", order=self._order,
                    where=where, delay_message_id=properties.get(PROPERTY_DELAY_MESSAGE_ID, "?"),
                    attempt_id=properties.get(PROPERTY_ATTEMPT_ID, "?"), received_ms=received,
                    key=message.partition_key() or None, payload_bytes=len(message.data()))
        self._order += 1
        with contextlib.suppress(Exception):
            self._consumer.acknowledge(message)
        return [seen]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()


class Consumers:
    """Every lane's consumer, each on a thread of its own, recording into ``sink``."""

    def __init__(self, sink: Sink, makers: list[Callable[[], Consumer]]) -> None:
        self._sink = sink
        self._makers = makers
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._where: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.last_ms = now_ms()
        self.errors: list[str] = []

    def __enter__(self) -> Consumers:
        consumers = [make() for make in self._makers]  # fail here, before anything runs
        for consumer in consumers:
            thread = threading.Thread(target=self._run, args=(consumer,), daemon=True,
                                      name=f"chaos-consumer-{consumer.lane}")
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                try:
                    batch = consumer.poll()
                except Exception as exc:  # a broker outage: keep trying, say so once
                    with self._lock:
                        if len(self.errors) < 20:
                            self.errors.append(f"{consumer.lane}: {exc}")
                    time.sleep(0.2)
                    continue
                for seen in batch:
                    self.record(seen)
        finally:
            consumer.close()

    def record(self, seen: Seen) -> None:
        """One record read (by a consumer, or drained by a nemesis)."""
        self._sink.write(seen)
        with self._lock:
            if seen.durable:
                self._where.setdefault(seen.attempt_id, seen.where)
            self.counts[seen.lane] = self.counts.get(seen.lane, 0) + 1
            self.last_ms = now_ms()

    def evidence(self, attempt_id: str) -> str | None:
        with self._lock:
            return self._where.get(attempt_id)

    def seen_attempts(self) -> set[str]:
        with self._lock:
            return set(self._where)
