"""Appending to a Kafka Shard Log: one idempotent, acks=all producer for one partition.

The producer is idempotent and not transactional, so offsets are dense (a gap is reported
by the runner, never skipped). ``append`` returns receipts only when every delivery report
succeeded within ``timeout_s`` (plus a flush grace); otherwise it raises
``KafkaAppendFailed`` — a ``ServiceUnreachable`` and an ``OSError``, so the shard loop
retries the very same bytes, and dedup makes any record stored twice a no-op. A producer
that hit a fatal idempotence error is replaced on the next append.
``confluent_kafka`` is imported in the constructor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from nereus.adapters.backends.kafka.kafka_client import client_config, error_of, idempotent_producer
from nereus.adapters.backends.shardlog.protocol import Receipt
from nereus.errors import NereusError, ServiceUnreachable

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

LINGER_MS: Final = 2
_FLUSH_GRACE_S: Final = 5.0  # flush waits this much beyond delivery.timeout.ms
_QUEUE_FULL_WAIT_S: Final = 0.05


class KafkaAppendFailed(ServiceUnreachable, OSError):
    """The broker did not confirm every record of an append; no receipts were handed out.

    Some of the records may be in the log all the same: retry with the same bytes.
    """


class KafkaAppender:
    """Produces a Shard Log's appends to partition ``partition`` of ``topic``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        *,
        client_id: str,
        timeout_s: float,
        description: str,
    ) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.timeout_s = timeout_s
        self.description = description
        self._producer_config = client_config(bootstrap, client_id,
                                              idempotent_producer(timeout_s, LINGER_MS))
        self._producer: Producer | None = Producer(self._producer_config)
        self._lock = threading.Lock()

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Produce ``payloads`` in order and return receipts once all are acknowledged."""
        if not payloads:
            return []
        with self._lock:
            producer = self._producer
            if producer is None:
                raise NereusError(f"{self.description}: the log is closed")
            reports: dict[int, tuple[KafkaError | None, Message]] = {}
            deadline = time.monotonic() + self.timeout_s + _FLUSH_GRACE_S
            refused, produced = None, 0
            for index, payload in enumerate(payloads):
                refused = self._produce(producer, index, payload, reports, deadline)
                if refused is not None:
                    break
                produced += 1
            producer.flush(max(0.0, deadline - time.monotonic()))
            return self._receipts(len(payloads), produced, reports, refused)

    def _produce(
        self,
        producer: Producer,
        index: int,
        payload: bytes,
        reports: dict[int, tuple[KafkaError | None, Message]],
        deadline: float,
    ) -> str | None:
        """Hand one payload to the producer; the reason if it was refused at once."""
        from confluent_kafka import KafkaException

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            reports[index] = (err, msg)

        while True:
            try:
                producer.produce(self.topic, value=payload, partition=self.partition,
                                 on_delivery=on_delivery)
                return None
            except BufferError:  # the local queue is full: let deliveries drain it
                if time.monotonic() >= deadline:
                    return f"record {index}: the producer's queue stayed full (_QUEUE_FULL)"
                producer.poll(_QUEUE_FULL_WAIT_S)
            except KafkaException as exc:
                name, text = error_of(exc)
                if name == "_FATAL":  # this producer can never send again: replace it
                    self._producer = self._new_producer()
                return f"record {index} refused before sending: {name}: {text}"

    def _receipts(
        self,
        count: int,
        produced: int,
        reports: dict[int, tuple[KafkaError | None, Message]],
        refused: str | None,
    ) -> list[Receipt]:
        failed = [(i, err) for i, (err, _) in sorted(reports.items()) if err is not None]
        missing = produced - len(reports)
        if refused is None and not failed and not missing:
            receipts = []
            for index in range(count):
                msg = reports[index][1]
                offset, (_, broker_ms) = msg.offset(), msg.timestamp()
                assert offset is not None  # a successful delivery report carries its offset
                receipts.append(Receipt(offset, broker_ms))
            return receipts
        if any(err.fatal() for _, err in failed):
            self._producer = self._new_producer()
        problems = []
        if refused is not None:
            problems.append(refused)
        if failed:
            index, err = failed[0]
            problems.append(f"{len(failed)} delivery report(s) failed, first record {index}: "
                            f"{err.name()}: {err.str()}")
        if missing:
            problems.append(f"{missing} record(s) without a delivery report after "
                            f"{self.timeout_s + _FLUSH_GRACE_S:g}s")
        raise KafkaAppendFailed(
            f"Kafka at {self.bootstrap}: append of {count} record(s) to {self.description} "
            f"was not confirmed ({'; '.join(problems)}); no receipts were given, some records "
            "may be in the log",
            hint="the same bytes may be appended again; is the broker running?")

    def _new_producer(self) -> Producer:
        from confluent_kafka import Producer

        return Producer(self._producer_config)

    def close(self) -> None:
        """Flush what is queued (a bounded wait) and drop the producer."""
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(min(self.timeout_s, _FLUSH_GRACE_S))
