"""The Pulsar destination: one message per attempt, classified by side-effect evidence.

Each request is one message (batching off, so the MessageId is exact evidence) with the
template's payload and key, its headers plus ``nereus-delay-message-id`` and
``nereus-attempt-id``, a bounded ``send_timeout_ms`` and ``block_if_queue_full=False``.
With ``deliver_at_handoff`` it is sent with ``deliver_at = deliverAt`` (honoured by Shared
and Key_Shared subscriptions only). Classification (``docs/outcomes-pulsar.md``): Ok is
PUBLISHED (``pulsar:<topic>@<ledger>:<entry>:<partition>``); a producer that could not be
opened, or a refusal inside ``send_async`` before enqueueing, is NOT_PUBLISHED; any failure
after enqueueing is UNKNOWN, never proof of absence; the rest of a batch after a failed
window is NOT_PUBLISHED LANE_UNAVAILABLE. ``scan_evidence`` is ``pulsar_evidence``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nereus.adapters.backends.destination.protocol import (
    DestinationClosed,
    PublishRequest,
    PublishResult,
)
from nereus.adapters.backends.pulsar.pulsar_client import (
    call_within,
    full_topic,
    is_pulsar_error,
    make_client,
    result_name,
    translate,
)
from nereus.adapters.backends.pulsar.pulsar_evidence import (
    PROPERTY_ATTEMPT_ID,
    PROPERTY_DELAY_MESSAGE_ID,
    PROPERTY_EVIDENCE_MAC,
    message_evidence,
    scan_topic,
)
from nereus.adapters.time_source import SYSTEM_CLOCK
from nereus.errors import NereusError
from nereus.evidence_mac import ExpectedMac
from nereus.records import Disposition, Outcome

OK: Final = "Ok"
BUILD_ERROR: Final = "BuildError"  # our own name: the message could not even be built

# the client refused inside send_async, before enqueueing: the broker never saw the message
REFUSED_BEFORE_SEND: Final[dict[str, Disposition]] = {
    "ProducerQueueIsFull": Disposition.RETRIABLE,
    "MemoryBufferIsFull": Disposition.RETRIABLE,
    "MessageTooBig": Disposition.PERMANENT,
    "InvalidMessage": Disposition.PERMANENT,
    BUILD_ERROR: Disposition.PERMANENT,
    "AlreadyClosed": Disposition.LANE_UNAVAILABLE,
    "NotConnected": Disposition.LANE_UNAVAILABLE,
    "ProducerFenced": Disposition.LANE_UNAVAILABLE,
    "ProducerNotInitialized": Disposition.LANE_UNAVAILABLE,
}

# refusals that are the message's own fault: its lane stays READY
MESSAGE_FAULTS: Final = frozenset({"MessageTooBig", "InvalidMessage", BUILD_ERROR})
# the broker's default maxMessageSize: a larger message is refused
MAX_RECORD_BYTES: Final = 5 * 1024 * 1024

# the producer could not be opened: nothing was sent; the lane's problem unless listed
OPEN_REFUSED: Final[dict[str, Disposition]] = {
    "TopicNotFound": Disposition.PERMANENT,
    "InvalidTopicName": Disposition.PERMANENT,
    "AuthorizationError": Disposition.PERMANENT,
    "ProducerBlockedQuotaExceededError": Disposition.RETRIABLE,
    "ProducerBlockedQuotaExceededException": Disposition.RETRIABLE,
}

# results after which the producer is dropped and re-opened by the next publish or probe
_PRODUCER_GONE: Final = frozenset({"AlreadyClosed", "NotConnected", "ProducerFenced",
                                   "ProducerNotInitialized"})
_CALLBACK_GRACE_S: Final = 5.0


def classify_send(result: object, *, before_send: bool) -> tuple[Outcome, Disposition]:
    """Outcome of one send from its result (a ``pulsar.Result``, a pulsar exception or a
    result name) and whether the client refused it before enqueueing."""
    name = result if isinstance(result, str) else result_name(result)
    if name == OK:
        return Outcome.PUBLISHED, Disposition.NONE
    if before_send and name in REFUSED_BEFORE_SEND:
        return Outcome.NOT_PUBLISHED, REFUSED_BEFORE_SEND[name]
    return Outcome.UNKNOWN, Disposition.NONE


def classify_open_failure(error: object) -> Disposition:
    """Disposition of a batch whose producer could not be opened (all NOT_PUBLISHED)."""
    name = error if isinstance(error, str) else result_name(error)
    return OPEN_REFUSED.get(name, Disposition.LANE_UNAVAILABLE)


class _OpenFailed(Exception):
    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name
        self.reason = reason


@dataclass(slots=True)
class _Slot:
    name: str
    message_id: Any = None
    before_send: bool = False
    detail: str = ""


class PulsarDestination:
    """A lane's Pulsar topic. The constructor does not contact the broker; the producer is
    opened by the first ``probe`` or ``publish`` (and again after it failed)."""

    def __init__(
        self,
        name: str,
        service_url: str,
        topic: str,
        *,
        deliver_at_handoff: bool = False,
        send_timeout_ms: int = 10_000,
        connect_timeout_s: float = 5.0,
        scan_timeout_s: float = 30.0,
        max_pending: int = 1_000,
        client_log_path: str | None = None,
    ) -> None:
        self.name = name
        self.service_url = service_url
        self.topic = full_topic(topic)
        self.max_record_bytes: int | None = MAX_RECORD_BYTES
        self.deliver_at_handoff = deliver_at_handoff
        self.send_timeout_ms = send_timeout_ms
        self.connect_timeout_s = connect_timeout_s
        self.scan_timeout_s = scan_timeout_s
        self.max_pending = max_pending
        self._log_path = client_log_path
        self._lock = threading.Lock()
        self._client: Any = None
        self._producer: Any = None
        self._closed = False

    # the client and the producer ----------------------------------------------------------
    def _client_now(self) -> Any:
        if self._closed:
            raise DestinationClosed(f"destination {self.name} is closed")
        if self._client is None:
            self._client = make_client(self.service_url, timeout_s=self.connect_timeout_s,
                                       log_path=self._log_path)
        return self._client

    def _ensure_producer(self) -> Any:
        """The open producer, opening one if needed; ``_OpenFailed`` if it cannot be."""
        if self._producer is not None:
            return self._producer
        try:
            client = self._client_now()
        except NereusError as exc:
            raise _OpenFailed("AlreadyClosed", exc.message) from None

        def open_producer() -> Any:
            return client.create_producer(
                self.topic,
                send_timeout_millis=self.send_timeout_ms,
                block_if_queue_full=False,
                batching_enabled=False,  # one message per entry: the MessageId is exact
                max_pending_messages=self.max_pending,
            )

        try:
            self._producer = call_within(self.connect_timeout_s, open_producer, client=client,
                                         service_url=self.service_url,
                                         doing=f"opening a producer on {self.topic}")
        except Exception as exc:
            self._discard_client()  # a deadline closed it; a fresh one is cheap anyway
            if is_pulsar_error(exc):
                error = translate(exc, self.service_url, f"opening a producer on {self.topic}")
                raise _OpenFailed(result_name(exc), error.message) from None
            if isinstance(exc, NereusError):  # call_within's deadline: no answer in time
                raise _OpenFailed("Timeout", exc.message) from None
            raise
        return self._producer

    def _discard_client(self) -> None:
        client, self._client, self._producer = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):  # it is being thrown away
                client.close()

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):  # a failed producer may refuse to close
                producer.close()

    # the Destination protocol -------------------------------------------------------------
    def probe(self) -> str | None:
        """None when a producer is open and connected, else why not."""
        with self._lock:
            try:
                producer = self._ensure_producer()
            except _OpenFailed as failed:
                return f"cannot open a producer on {self.topic}: {failed.reason}"
            if not producer.is_connected():
                return f"the producer on {self.topic} is not connected (reconnecting)"
            return None

    def publish(
        self, requests: Sequence[PublishRequest], now_ms: Callable[[], int]
    ) -> list[PublishResult]:
        if not requests:
            return []
        with self._lock:
            try:
                producer = self._ensure_producer()
            except _OpenFailed as failed:
                disposition = classify_open_failure(failed.name)
                evidence = (f"pulsar:{self.topic}: no producer ({failed.name or 'error'}), "
                            f"nothing sent: {failed.reason}")
                return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, disposition,
                                      evidence) for r in requests]
            published_at = now_ms()
            results: list[PublishResult] = []
            for start in range(0, len(requests), self.max_pending):
                window = requests[start:start + self.max_pending]
                if results and any(r.outcome != Outcome.PUBLISHED for r in results):
                    results += [PublishResult(
                        r.attempt_id, Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                        f"pulsar:{self.topic}: not sent, an earlier send of this batch failed")
                        for r in window]
                    continue
                results += self._send_window(producer, window, published_at)
            return results

    def _send_window(
        self, producer: Any, window: Sequence[PublishRequest], published_at: int
    ) -> list[PublishResult]:
        count = len(window)
        slots: list[_Slot | None] = [None] * count
        done = threading.Condition()
        caller = threading.get_ident()
        sending = [-1]  # index inside send_async right now (callbacks check it)

        def callback_for(index: int) -> Callable[[Any, Any], None]:
            def callback(result: Any, message_id: Any) -> None:
                # an exception escaping a pulsar callback terminates the process
                try:
                    inline = threading.get_ident() == caller and sending[0] == index
                    with done:
                        slots[index] = _Slot(result_name(result), message_id, inline)
                        done.notify_all()
                except BaseException:  # pragma: no cover - nothing here can fail
                    pass
            return callback

        for index, request in enumerate(window):
            template = request.template
            properties = dict(template.headers)
            properties[PROPERTY_DELAY_MESSAGE_ID] = template.delay_message_id
            properties[PROPERTY_ATTEMPT_ID] = request.attempt_id
            properties[PROPERTY_EVIDENCE_MAC] = request.mac
            sending[0] = index
            try:
                producer.send_async(
                    template.payload, callback_for(index), properties=properties,
                    partition_key=template.key, event_timestamp=published_at,
                    deliver_at=template.deliver_at_ms if self.deliver_at_handoff else None,
                    **self._send_options(request),
                )
            except Exception as exc:  # raised inside send_async: nothing was enqueued
                name = result_name(exc) if is_pulsar_error(exc) else BUILD_ERROR
                with done:
                    slots[index] = _Slot(name, None, True, f"{type(exc).__name__}: {exc}")
            finally:
                sending[0] = -1
        deadline = time.monotonic() + self.send_timeout_ms / 1000 + _CALLBACK_GRACE_S
        with done:
            while any(slot is None for slot in slots):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                done.wait(left)
            final = list(slots)
        results = [self._result(request, slot, published_at)
                   for request, slot in zip(window, final, strict=True)]
        if any(slot is not None and slot.name in _PRODUCER_GONE for slot in final):
            self._drop_producer()
        return results

    def _send_options(self, request: PublishRequest) -> dict[str, Any]:
        """More ``send_async`` arguments for ``request`` (a subclass's sequence id)."""
        return {}

    def _result(self, request: PublishRequest, slot: _Slot | None,
                published_at: int) -> PublishResult:
        if slot is None:
            return PublishResult(
                request.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                f"pulsar:{self.topic}: no answer from the client within "
                f"{self.send_timeout_ms / 1000 + _CALLBACK_GRACE_S:g}s after sending")
        outcome, disposition = classify_send(slot.name, before_send=slot.before_send)
        if outcome == Outcome.PUBLISHED:
            return PublishResult(request.attempt_id, outcome, disposition,
                                 message_evidence(self.topic, slot.message_id), published_at)
        when = "refused before sending" if slot.before_send else "after sending"
        extra = f" ({slot.detail})" if slot.detail else ""
        if outcome == Outcome.UNKNOWN:
            text = f"{slot.name} {when}{extra}: the broker may have stored it"
        else:
            text = f"{slot.name} {when}{extra}: never handed to the broker"
        return PublishResult(request.attempt_id, outcome, disposition,
                             f"pulsar:{self.topic}: {text}",
                             message_fault=outcome == Outcome.NOT_PUBLISHED
                             and slot.name in MESSAGE_FAULTS)

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        """Wanted attempt ids found on the topic, with the MAC ``wanted`` expects for them,
        between ``since_ms`` and ``until_ms`` (publish time), mapped to their MessageId
        evidence. Stops when all are found, at the end of each partition, past
        ``until_ms``, or at ``scan_timeout_s`` (returning what it found: absence proves
        nothing)."""

        if not wanted:
            return {}
        with self._lock:
            client = self._client_now()
        deadline = SYSTEM_CLOCK.monotonic() + self.scan_timeout_s
        try:
            found = scan_topic(client, self.topic, wanted, since_ms, until_ms, deadline)
        except Exception as exc:
            if is_pulsar_error(exc):
                raise translate(exc, self.service_url,
                                f"scanning {self.topic} for evidence") from None
            raise
        return found

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_producer()
            self._discard_client()

