"""The Kafka destination: an idempotent, acks=all producer, classified by delivery reports.

Each request becomes one record on ``topic``: key = ``template.key``, value =
``template.payload``, headers = the template's own headers followed by
``nereus-delay-message-id`` and ``nereus-attempt-id`` (a template header with either name is
dropped, so consumers and ``scan_evidence`` see exactly one of each). Partitions are chosen
by ``murmur2_random``, the Java client's default, so keys land where Java producers put
them.

Classification (``docs/outcomes.md``, section Kafka, is the same table in prose):

* a successful delivery report is PUBLISHED with evidence ``kafka:<topic>/<partition>@<offset>``;
* a record the client refused in ``produce()`` was never handed over: NOT_PUBLISHED
  (RETRIABLE for a full queue, PERMANENT for size or invalid arguments);
* a delivery report whose error proves the broker refused the batch before appending it
  (size, invalid record, authorization, unknown topic) is NOT_PUBLISHED. A broker refuses a
  whole batch, so when several records of one call share such an error each is sent again
  alone, and only the answer for a record sent alone decides;
* everything else (timeouts, transport errors, NOT_ENOUGH_REPLICAS_AFTER_APPEND, fatal
  idempotence errors, a report missing when the flush deadline passes) is UNKNOWN: the
  record may have been appended, and it is never guessed otherwise.

``scan_evidence`` looks for records by their ``nereus-attempt-id`` header, to resolve
UNKNOWN attempts with evidence; not finding one proves nothing.

``close`` flushes and drops the producer; a closed destination never makes another one
(publish answers NOT_PUBLISHED LANE_UNAVAILABLE, as the Protocol says).

``confluent_kafka`` is imported inside methods, never at module level.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nereus.adapters._kafka import (
    CLOSE_WAIT_S,
    UNREACHABLE_ERRORS,
    admin_client,
    client_config,
    close_consumer,
    ensure_topic,
    error_of,
    translate,
    unreachable,
)
from nereus.engine.destinations.protocol import DestinationClosed, PublishRequest, PublishResult
from nereus.errors import NereusError, NotFound, UsageError
from nereus.records import Disposition, Outcome

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message, Producer
    from confluent_kafka.admin import AdminClient

DELAY_MESSAGE_ID_HEADER: Final = "nereus-delay-message-id"
ATTEMPT_ID_HEADER: Final = "nereus-attempt-id"
EVIDENCE_MAC_HEADER: Final = "nereus-evidence-mac"
_RESERVED_HEADERS: Final = frozenset({DELAY_MESSAGE_ID_HEADER, ATTEMPT_ID_HEADER,
                                      EVIDENCE_MAC_HEADER})

LINGER_MS: Final = 5
# a probe's metadata request never waits longer than this: the shard loop asks a lane
# publisher for readiness, and an unreachable broker must not hold it up for long
PROBE_TIMEOUT_S: Final = 1.0
_FLUSH_GRACE_S: Final = 5.0  # flush waits this much beyond delivery.timeout.ms
_METADATA_PROPAGATION_MS: Final = 2_000  # how long an unknown topic may be "just created"
_SCAN_BATCH: Final = 500
_SCAN_POLL_S: Final = 0.2


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one record's fate is classified, and why."""

    outcome: Outcome
    disposition: Disposition
    why: str
    message_fault: bool = False  # the record itself was refused: its lane stays READY


# refusals that are the record's own fault (its size or content), not the lane's
MESSAGE_FAULTS: Final = frozenset({"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE",
                                   "INVALID_RECORD", "_INVALID_ARG", "_INVALID_TYPE"})
# the client's default message.max.bytes: a larger record is refused before it is sent
MAX_RECORD_BYTES: Final = 1_000_000


# delivery-report errors that prove the broker refused the record's batch before appending
# it; a None disposition depends on whether the destination creates its topic
_REFUSED: Final[dict[str, tuple[Disposition | None, str]]] = {
    "MSG_SIZE_TOO_LARGE": (Disposition.PERMANENT,
                           "the broker refuses a batch over max.message.bytes before appending"),
    "RECORD_LIST_TOO_LARGE": (Disposition.PERMANENT,
                              "the broker refuses a batch larger than a log segment"),
    "INVALID_RECORD": (Disposition.PERMANENT,
                       "the broker's record validation refused the batch before appending"),
    "TOPIC_AUTHORIZATION_FAILED": (Disposition.PERMANENT,
                                   "the broker refuses writes to this topic (ACL)"),
    "CLUSTER_AUTHORIZATION_FAILED": (Disposition.PERMANENT,
                                     "the broker refuses idempotent writes (ACL)"),
    "_UNKNOWN_TOPIC": (None, "the topic does not exist, so nothing was sent"),
    "UNKNOWN_TOPIC_OR_PART": (None, "the topic or partition does not exist"),
}
# refusals a broker gives a whole batch: records sharing one are retried alone to find out
BATCH_REFUSALS: Final = frozenset({"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE",
                                   "INVALID_RECORD"})

# errors raised by produce(): the record never entered the client, so all NOT_PUBLISHED
_NOT_HANDED_OVER: Final[dict[str, tuple[Disposition | None, str]]] = {
    "_QUEUE_FULL": (Disposition.RETRIABLE, "the client's local queue is full"),
    "MSG_SIZE_TOO_LARGE": (Disposition.PERMANENT,
                           "the record is larger than the client's message.max.bytes"),
    "_INVALID_ARG": (Disposition.PERMANENT, "the client refused the record's arguments"),
    "_INVALID_TYPE": (Disposition.PERMANENT, "the client refused the record's types"),
    "_UNKNOWN_TOPIC": (None, "the topic does not exist"),
    "UNKNOWN_TOPIC_OR_PART": (None, "the topic or partition does not exist"),
    "_UNKNOWN_PARTITION": (None, "the partition does not exist"),
    "_FATAL": (Disposition.LANE_UNAVAILABLE,
               "the producer hit a fatal error and is replaced; the record is not at fault"),
    "_STATE": (Disposition.LANE_UNAVAILABLE, "the producer is in an unusable state"),
}

# named for docs/outcomes.md and the tests; any error not listed above is UNKNOWN too
AMBIGUOUS_EXAMPLES: Final = (
    "_MSG_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_ENOUGH_REPLICAS", "NOT_LEADER_FOR_PARTITION", "KAFKA_STORAGE_ERROR",
    "OUT_OF_ORDER_SEQUENCE_NUMBER", "_FATAL", "_PURGE_INFLIGHT", "_PURGE_QUEUE",
    "_UNKNOWN_PARTITION",
)
_TOPIC_GONE: Final = frozenset({"_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION"})


def _name(error: KafkaError | str) -> str:
    return error if isinstance(error, str) else error.name()


def _topic_disposition(create_topic: bool) -> Disposition:
    # with creation on, the lane's probe re-creates the topic: not the record's fault
    return Disposition.LANE_UNAVAILABLE if create_topic else Disposition.PERMANENT


def classify_delivery_error(error: KafkaError | str | None, *, create_topic: bool) -> Verdict:
    """The verdict for a delivery report with ``error`` (a KafkaError or its name)."""
    if error is None:
        return Verdict(Outcome.PUBLISHED, Disposition.NONE,
                       "the broker acknowledged the record with acks=all")
    name = _name(error)
    refused = _REFUSED.get(name)
    if refused is None:
        return Verdict(Outcome.UNKNOWN, Disposition.NONE,
                       "the record may have been appended before the error; it stays an "
                       "obligation until evidence settles it")
    disposition, why = refused
    return Verdict(Outcome.NOT_PUBLISHED,
                   disposition or _topic_disposition(create_topic), why,
                   message_fault=name in MESSAGE_FAULTS)


def classify_produce_error(error: KafkaError | str, *, create_topic: bool) -> Verdict:
    """The verdict for a record that ``produce()`` refused (``"_QUEUE_FULL"`` for the
    BufferError it raises): it never entered the client, so it is NOT_PUBLISHED."""
    name = _name(error)
    disposition, why = _NOT_HANDED_OVER.get(
        name, (Disposition.RETRIABLE, "produce() refused the record before queueing it"))
    return Verdict(Outcome.NOT_PUBLISHED,
                   disposition or _topic_disposition(create_topic), why,
                   message_fault=name in MESSAGE_FAULTS)


def evidence_of(topic: str, partition: int | None, offset: int | None) -> str:
    return f"kafka:{topic}/{partition}@{offset}"


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
        self.probe_timeout_s = min(timeout_s, PROBE_TIMEOUT_S)
        timeout_ms = max(1, int(timeout_s * 1000))
        self._producer_config = client_config(bootstrap, client_id, {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": LINGER_MS,
            "delivery.timeout.ms": max(timeout_ms, LINGER_MS + 1),
            "request.timeout.ms": min(30_000, timeout_ms),
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
                     admin=self._admin)
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
            (k, v.encode()) for k, v in template.headers.items() if k not in _RESERVED_HEADERS]
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
        if report.error.name() in _TOPIC_GONE:
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
        self, wanted: Mapping[str, str], since_ms: int, until_ms: int
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
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        if self._closed:
            raise DestinationClosed(f"destination {self.name} is closed: no evidence scan")
        if not wanted:
            return {}
        by_id = {a.encode(): a for a in wanted}
        consumer = Consumer(client_config(self.bootstrap, self.client_id, {
            "group.id": f"nereus-scan-{self.topic}",  # never commits
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
            "auto.offset.reset": "earliest",
        }))
        deadline = time.monotonic() + self.timeout_s
        try:
            ranges = self._scan_ranges(consumer, since_ms, until_ms)
            found: dict[str, str] = {}
            if ranges:
                consumer.assign([TopicPartition(self.topic, p, start)
                                 for p, (start, _) in ranges.items()])
            pending = set(ranges)
            while pending and len(found) < len(by_id):
                if time.monotonic() >= deadline:
                    raise unreachable(
                        self.bootstrap, f"scanning topic {self.topic}",
                        f"partitions {sorted(pending)} not read to the end within "
                        f"{self.timeout_s:g}s")
                for msg in consumer.consume(_SCAN_BATCH, timeout=_SCAN_POLL_S):
                    self._scan_one(msg, ranges, pending, by_id, wanted, found)
            return found
        except KafkaException as exc:
            raise translate(exc, self.bootstrap, f"scanning topic {self.topic}") from None
        finally:
            close_consumer(consumer, f"the scan of {self.topic}",
                           min(self.timeout_s, CLOSE_WAIT_S))

    def _scan_ranges(
        self, consumer: Consumer, since_ms: int, until_ms: int
    ) -> dict[int, tuple[int, int]]:
        """partition -> [first offset stamped >= since_ms, end offset) to read."""
        from confluent_kafka import TopicPartition

        metadata = consumer.list_topics(topic=self.topic, timeout=self.timeout_s)
        found = metadata.topics.get(self.topic)
        if found is None or found.error is not None:
            detail = found.error.str() if found is not None and found.error else "no metadata"
            if found is not None and found.error and found.error.name() in UNREACHABLE_ERRORS:
                raise unreachable(self.bootstrap, f"metadata of topic {self.topic}", detail)
            raise NotFound(f"Kafka at {self.bootstrap}: topic {self.topic}: {detail}")
        partitions = sorted(found.partitions)
        starts = consumer.offsets_for_times(
            [TopicPartition(self.topic, p, since_ms) for p in partitions],
            timeout=self.timeout_s)
        stops = consumer.offsets_for_times(
            [TopicPartition(self.topic, p, until_ms + 1) for p in partitions],
            timeout=self.timeout_s)
        ranges = {}
        for start, stop in zip(starts, stops, strict=True):
            if start.offset < 0:
                continue  # nothing stamped at or after since_ms
            _, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, start.partition), timeout=self.timeout_s,
                cached=False)
            end = high if stop.offset < 0 else min(high, stop.offset)
            if start.offset < end:
                ranges[start.partition] = (start.offset, end)
        return ranges

    def _scan_one(
        self, msg: Message, ranges: dict[int, tuple[int, int]], pending: set[int],
        by_id: dict[bytes, str], wanted: Mapping[str, str], found: dict[str, str],
    ) -> None:
        partition = msg.partition()
        if partition is None or partition not in pending:
            return
        err = msg.error()
        if err is not None:
            if err.name() == "_PARTITION_EOF":
                pending.discard(partition)
                return
            from confluent_kafka import KafkaException

            raise KafkaException(err)
        offset = msg.offset()
        if offset is None:
            return
        if offset >= ranges[partition][1]:
            pending.discard(partition)
            return
        raw = msg.headers() or []
        headers = dict(raw.items() if isinstance(raw, dict) else raw)
        attempt = headers.get(ATTEMPT_ID_HEADER)
        if isinstance(attempt, bytes) and attempt in by_id:
            attempt_id = by_id[attempt]
            mac = headers.get(EVIDENCE_MAC_HEADER)
            if isinstance(mac, bytes) and hmac.compare_digest(mac, wanted[attempt_id].encode()):
                found[attempt_id] = evidence_of(self.topic, partition, offset)
        if offset >= ranges[partition][1] - 1:
            pending.discard(partition)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
            self._admin = None
        if producer is not None:
            producer.flush(min(self.timeout_s, _FLUSH_GRACE_S))
