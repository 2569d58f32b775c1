"""The Kafka destination: an idempotent, acks=all producer, classified by delivery reports.

Each request is one record: the template's key, payload and headers, then the evidence
headers (``kafka_evidence``); partitions by ``murmur2_random``, the Java client's default.
Classification is ``kafka_verdicts`` (``docs/outcomes.md``): a delivery report is
PUBLISHED (evidence ``kafka:<topic>/<partition>@<offset>``); a refusal that proves the
broker refused the batch is NOT_PUBLISHED, decided only for a record sent alone; anything
else, or a report missing at the flush deadline, is UNKNOWN. ``scan_evidence`` finds
records by their ``nereus-attempt-id`` header (not finding one proves nothing). A closed
destination never makes another producer. ``confluent_kafka`` is imported inside methods.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nereus.adapters.backends.destination.protocol import (
    DestinationClosed,
    PublishRequest,
    PublishResult,
)
from nereus.adapters.backends.kafka.kafka_client import (
    admin_client,
    client_config,
    ensure_topic,
    error_of,
    idempotent_producer,
)
from nereus.adapters.backends.kafka.kafka_evidence import (
    ATTEMPT_ID_HEADER,
    DELAY_MESSAGE_ID_HEADER,
    EVIDENCE_MAC_HEADER,
    RESERVED_HEADERS,
    evidence_of,
    scan_topic,
)
from nereus.adapters.backends.kafka.kafka_verdicts import (
    BATCH_REFUSALS,
    TOPIC_GONE,
    Verdict,
    classify_delivery_error,
    classify_produce_error,
)
from nereus.errors import NereusError, NotFound, UsageError
from nereus.evidence_mac import ExpectedMac
from nereus.records import Disposition, Outcome

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer
    from confluent_kafka.admin import AdminClient

LINGER_MS: Final = 5
# a probe's metadata request never waits longer than this: the shard loop asks a lane
# publisher for readiness, and an unreachable broker must not hold it up for long
PROBE_TIMEOUT_S: Final = 1.0
# the client's default message.max.bytes: a larger record is refused before it is sent
MAX_RECORD_BYTES: Final = 1_000_000
_FLUSH_GRACE_S: Final = 5.0  # flush waits this much beyond delivery.timeout.ms
_METADATA_PROPAGATION_MS: Final = 2_000  # how long an unknown topic may be "just created"


@dataclass(slots=True)
class _Report:
    error: KafkaError | None
    message: Message


class KafkaDestination:
    """Publishes to one Kafka topic; one instance per lane."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        *,
        create_topic: bool = True,
        partitions: int = 1,
        timeout_s: float = 30,
        client_id: str = "nereus",
        replication_factor: int | None = None,
    ) -> None:
        from confluent_kafka import Producer

        if timeout_s <= 0:
            raise UsageError(f"destination {name}: timeout_s must be positive, not {timeout_s}")
        self.name = name
        self.bootstrap = bootstrap
        self.topic = topic
        self.max_record_bytes: int | None = MAX_RECORD_BYTES
        self.create_topic = create_topic
        self.partitions = partitions
        self.timeout_s = timeout_s
        self.client_id = client_id
        # a topic this lane creates: this many replicas, or the brokers' default (-1)
        self.replication_factor = replication_factor or -1
        self.probe_timeout_s = min(timeout_s, PROBE_TIMEOUT_S)
        self._producer_config = client_config(bootstrap, client_id, {
            **idempotent_producer(timeout_s, LINGER_MS),
            "partitioner": "murmur2_random",
            "topic.metadata.propagation.max.ms": _METADATA_PROPAGATION_MS,
        })
        # made now (no network wait): its ProducerId is acquired before the first publish
        self._producer: Producer | None = Producer(self._producer_config)
        self._topic_ready = False
        self._admin: AdminClient | None = None  # made by the first probe, then kept
        self._lock = threading.Lock()
        self._closed = False

    # readiness --------------------------------------------------------------------------
    def _ensure_topic(self) -> None:
        if self._admin is None:
            self._admin = admin_client(self.bootstrap, self.client_id)
        ensure_topic(self.bootstrap, self.topic, client_id=self.client_id,
                     partitions=self.partitions, config={}, create=self.create_topic,
                     timeout_s=self.timeout_s, metadata_timeout_s=self.probe_timeout_s,
                     admin=self._admin, replication_factor=self.replication_factor)
        self._topic_ready = True

    def probe(self) -> str | None:
        """None when the broker answers and the topic exists (or was just created)."""
        if self._closed:
            return f"destination {self.name} is closed"
        try:
            self._ensure_topic()
        except NereusError as exc:
            self._topic_ready = False
            return exc.message
        return None

    # publish ----------------------------------------------------------------------------
    def publish(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]:
        with self._lock:
            return self._publish(requests, now_ms)

    def _publish(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]:
        if not requests:
            return []
        if self._closed:
            return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED,
                                  Disposition.LANE_UNAVAILABLE,
                                  f"kafka:{self.topic}: destination {self.name} is closed: "
                                  "nothing was sent") for r in requests]
        if not self._topic_ready:
            try:
                self._ensure_topic()
            except NereusError as exc:
                # a missing topic that may not be created fails the message (as the
                # unknown-topic delivery errors do); a broker that does not answer or
                # refuses to create the topic is the lane's fault, not the message's
                disposition = (Disposition.PERMANENT if isinstance(exc, NotFound)
                               else Disposition.LANE_UNAVAILABLE)
                return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, disposition,
                                      f"kafka:{self.topic}: nothing was sent: {exc.message}")
                        for r in requests]
        producer = self._producer or self._new_producer()
        published_at = now_ms()
        verdicts: dict[int, PublishResult] = {}
        reports: dict[int, _Report] = {}
        deadline = time.monotonic() + self.timeout_s + _FLUSH_GRACE_S
        for index, request in enumerate(requests):
            refused = self._produce(producer, request, index, reports)
            if refused is not None:
                verdicts[index] = refused
        producer.flush(max(0.0, deadline - time.monotonic()))
        refused_batches = [i for i, report in reports.items()
                           if report.error is not None and report.error.name() in BATCH_REFUSALS]
        if len(refused_batches) > 1:
            # one refusal for a whole batch: only a record sent alone gets its own answer
            for index in refused_batches:
                reports.pop(index)
                again = self._send_alone(producer, requests[index], index, reports)
                if again is not None:
                    verdicts[index] = again
        fatal = False
        for index, request in enumerate(requests):
            if index in verdicts:
                continue
            report = reports.get(index)
            if report is None:
                verdicts[index] = PublishResult(
                    request.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                    f"kafka:{self.topic}: no delivery report within "
                    f"{self.timeout_s + _FLUSH_GRACE_S:g}s; the record may still be appended")
                continue
            fatal = fatal or (report.error is not None and report.error.fatal())
            verdicts[index] = self._delivered(request, report, published_at)
        if fatal:
            self._new_producer()
        return [verdicts[i] for i in range(len(requests))]

    def _produce(
        self, producer: Producer, request: PublishRequest, index: int,
        reports: dict[int, _Report],
    ) -> PublishResult | None:
        """Hand one record to the producer; the result if it was refused there and then."""
        from confluent_kafka import KafkaException

        template = request.template
        headers: list[tuple[str, str | bytes | None]] = [
            (k, v.encode()) for k, v in template.headers.items() if k not in RESERVED_HEADERS]
        headers += [(DELAY_MESSAGE_ID_HEADER, template.delay_message_id.encode()),
                    (ATTEMPT_ID_HEADER, request.attempt_id.encode()),
                    (EVIDENCE_MAC_HEADER, request.mac.encode())]

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            reports[index] = _Report(err, msg)

        try:
            producer.produce(self.topic, value=template.payload,
                             key=None if template.key is None else template.key.encode(),
                             headers=headers, on_delivery=on_delivery)
        except BufferError as exc:
            name, text = "_QUEUE_FULL", str(exc)
        except KafkaException as exc:
            name, text = error_of(exc)
            if name == "_FATAL":
                self._producer = None
        except (TypeError, ValueError) as exc:
            name, text = "_INVALID_ARG", f"{type(exc).__name__}: {exc}"
        else:
            producer.poll(0)
            return None
        verdict = classify_produce_error(name, create_topic=self.create_topic)
        return self._result(request, verdict,
                            f"kafka:{self.topic}: produce() refused it: {name}: {text}")

    def _send_alone(
        self, producer: Producer, request: PublishRequest, index: int,
        reports: dict[int, _Report],
    ) -> PublishResult | None:
        refused = self._produce(producer, request, index, reports)
        if refused is not None:
            return refused
        producer.flush(self.timeout_s + _FLUSH_GRACE_S)
        return None  # its report (if any) is in ``reports`` now

    def _delivered(
        self, request: PublishRequest, report: _Report, published_at: int
    ) -> PublishResult:
        msg = report.message
        verdict = classify_delivery_error(report.error, create_topic=self.create_topic)
        if verdict.outcome == Outcome.PUBLISHED:
            kind, stamp = msg.timestamp()
            return PublishResult(request.attempt_id, Outcome.PUBLISHED, Disposition.NONE,
                                 evidence_of(self.topic, msg.partition(), msg.offset()),
                                 stamp if kind and stamp > 0 else published_at)
        assert report.error is not None
        if report.error.name() in TOPIC_GONE:
            self._topic_ready = False  # check (and re-create) it before the next batch
        return self._result(request, verdict, f"kafka:{self.topic}: {report.error.name()}: "
                            f"{report.error.str()}")

    @staticmethod
    def _result(request: PublishRequest, verdict: Verdict, what: str) -> PublishResult:
        return PublishResult(request.attempt_id, verdict.outcome, verdict.disposition,
                             f"{what} ({verdict.why})", message_fault=verdict.message_fault)

    def _new_producer(self) -> Producer:
        from confluent_kafka import Producer

        old, self._producer = self._producer, None
        if old is not None:
            old.flush(0)
        self._producer = Producer(self._producer_config)
        return self._producer

    # evidence ---------------------------------------------------------------------------
    def scan_evidence(
        self, wanted: Mapping[str, ExpectedMac], since_ms: int, until_ms: int
    ) -> dict[str, str]:
        """attempt id -> evidence for records carrying one of ``wanted``'s attempt ids in
        their ``nereus-attempt-id`` header *and* the MAC ``wanted`` expects for it in
        ``nereus-evidence-mac``, among those stamped from ``since_ms`` to ``until_ms``.

        The window is found with the topic's time index (offsets_for_times), so widen it by
        the producers' clock error when the topic uses CreateTime. Raises
        ``ServiceUnreachable`` when the broker does not answer or the scan does not finish
        within ``timeout_s``: a partial scan is not an answer. An id that is not found
        proves nothing (the record may lie outside the window or be deleted).
        """
        if self._closed:
            raise DestinationClosed(f"destination {self.name} is closed: no evidence scan")
        return scan_topic(self.bootstrap, self.client_id, self.topic, self.timeout_s, wanted,
                          since_ms, until_ms)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
            self._admin = None
        if producer is not None:
            producer.flush(min(self.timeout_s, _FLUSH_GRACE_S))
