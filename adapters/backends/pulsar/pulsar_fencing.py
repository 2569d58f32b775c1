"""A Pulsar lane that fences its writers (``[lanes.NAME] fencing = true``): broker-side
deduplication, one named producer per shard, a sequence id per attempt (``fencing.py``;
``docs/rules.md`` §10).

The topic must have deduplication on (the fence checks it through ``admin_url``). Each
shard's messages go through the producer named ``nereus-<route>-<partition>`` with the
attempt's admitted Shard Log position as its sequence id: increasing, and above every
earlier owner's (a new owner admits after its activation barrier). A name is held by one
connected producer at a time, and the broker keeps, per name, the last sequence id it
persisted, dropping any message at or below it.

``fence`` opens the shard's producer under that name (refused while the old owner's is
still connected: proof of nothing), learns the last persisted sequence id, waits until
the topic has no write pending (what the old producer handed over is persisted or never
will be), then reads the topic from the orphans' admission less a minute to its end: a
record found is PUBLISHED, an attempt absent NOT_PUBLISHED. Nothing the old owner still
holds can land later: its name is taken, and a resend carries a sequence id the broker
drops. A send the broker drops as a duplicate is UNKNOWN, never PUBLISHED.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nereus.adapters.backends.destination.fencing import Fenced, NotFenced, absent_evidence
from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.pulsar.pulsar_client import (
    admin_reason,
    admin_request,
    call_within,
    is_pulsar_error,
    quote_path,
)
from nereus.adapters.backends.pulsar.pulsar_destination import PulsarDestination, _OpenFailed
from nereus.adapters.backends.pulsar.pulsar_evidence import (
    PROPERTY_ATTEMPT_ID,
    PROPERTY_EVIDENCE_MAC,
    has_message_available,
    message_evidence,
)
from nereus.errors import NereusError
from nereus.evidence_mac import ExpectedMac, mac_accepted
from nereus.records import Disposition, Outcome

_DRAIN_POLL_S = 0.05
_READ_WAIT_MS = 1_000


def producer_name(shard: str) -> str:
    return "nereus-" + shard.replace("/", "-")


class DeduplicatedPulsarDestination(PulsarDestination):
    """A ``PulsarDestination`` whose shard requests go through the shard's named producer."""

    def __init__(self, *args: Any, admin_url: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.admin_url = admin_url
        self._owners: dict[str, Any] = {}  # shard -> its named producer

    def _owner(self, shard: str) -> Any:
        producer = self._owners.get(shard)
        if producer is None:
            client = self._client_now()
            producer = call_within(self.connect_timeout_s, lambda: client.create_producer(
                self.topic, producer_name=producer_name(shard),
                send_timeout_millis=self.send_timeout_ms, block_if_queue_full=False,
                batching_enabled=False, max_pending_messages=self.max_pending),
                client=client, service_url=self.service_url,
                doing=f"opening producer {producer_name(shard)} on {self.topic}")
            self._owners[shard] = producer
        return producer

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        plain = [r for r in requests if not r.shard]
        results = super().publish(plain, now_ms) if plain else []
        by_shard: dict[str, list[PublishRequest]] = {}
        for request in requests:
            if request.shard:
                by_shard.setdefault(request.shard, []).append(request)
        with self._lock:
            for shard, batch in by_shard.items():
                results += self._publish_shard(shard, batch, now_ms)
        return results

    def _publish_shard(self, shard: str, batch: list[PublishRequest],
                       now_ms: Callable[[], int]) -> list[PublishResult]:
        try:
            producer = self._owner(shard)
        except (NereusError, _OpenFailed) as exc:
            why = str(exc)
        except Exception as exc:
            if not is_pulsar_error(exc):
                raise
            why = f"{type(exc).__name__}: {exc}"
        else:
            results = self._send_window(producer, batch, now_ms())
            if any(r.outcome != Outcome.PUBLISHED for r in results):
                self._owners.pop(shard, None)  # reopened (and its name re-taken) next time
                with contextlib.suppress(Exception):
                    producer.close()
            return results
        return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                              f"pulsar:{self.topic}: no producer {producer_name(shard)} "
                              f"({why}): nothing sent") for r in batch]

    def _send_options(self, request: PublishRequest) -> dict[str, Any]:
        return {"sequence_id": request.sequence} if request.sequence >= 0 else {}

    def _result(self, request: PublishRequest, slot: Any, published_at: int) -> PublishResult:
        if slot is not None and slot.message_id is not None and \
                slot.message_id.ledger_id() < 0 and slot.name == "Ok":
            return PublishResult(request.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                                 f"pulsar:{self.topic}: dropped by the broker as a duplicate "
                                 f"of sequence id {request.sequence} or a later one")
        return super()._result(request, slot, published_at)

    # fencing ----------------------------------------------------------------------------
    def fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        if not self._lock.acquire(timeout=self.scan_timeout_s):
            raise NotFenced(f"a publish to pulsar:{self.topic} is still running")
        try:
            return self._fence(shard, wanted, since_ms)
        except NereusError as exc:
            raise NotFenced(f"pulsar:{self.topic}: {exc.message}") from None
        except Exception as exc:
            if not is_pulsar_error(exc):
                raise
            raise NotFenced(f"pulsar:{self.topic}: {type(exc).__name__}: {exc}") from None
        finally:
            self._lock.release()

    def _fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        self._check_deduplication()
        old = self._owners.pop(shard, None)
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        try:
            last = self._owner(shard).last_sequence_id()
        except Exception as exc:
            raise NotFenced(f"cannot take the producer name {producer_name(shard)} on "
                            f"{self.topic} (is the old owner's still connected?): "
                            f"{exc}") from None
        deadline = time.monotonic() + self.scan_timeout_s
        self._drain(deadline)
        found = self._read_all(wanted, since_ms, deadline) if wanted else {}
        how = (f"producer {producer_name(shard)} taken over on {self.topic} (the broker "
               f"persisted up to sequence id {last} and drops any resend at or below it); "
               "no write pending; the topic read to its end holds no record of the attempt")
        return Fenced(found, absent_evidence("pulsar deduplication", how))

    def _admin(self, path: str) -> Any:
        tail = self.topic.split("://", 1)[1]
        status, body = admin_request(self.admin_url, "GET",
                                     f"admin/v2/persistent/{quote_path(tail)}/{path}",
                                     timeout_s=self.connect_timeout_s)
        if status != 200:
            raise NotFenced(f"the Pulsar admin API at {self.admin_url} answered {status} for "
                            f"{path} of {self.topic}: {admin_reason(body)}")
        return body

    def _check_deduplication(self) -> None:
        if self._admin("deduplicationEnabled?applied=true") is not True:
            raise NotFenced(f"deduplication is off on {self.topic} (enable it on the topic "
                            "or its namespace; without it absence proves nothing)")

    def _drain(self, deadline: float) -> None:
        """Wait until no write is pending on the topic's ledger."""
        while True:
            stats = self._admin("internalStats")
            if not stats.get("pendingAddEntriesCount"):
                return
            if time.monotonic() > deadline:
                raise NotFenced(f"writes to {self.topic} still pending after "
                                f"{self.scan_timeout_s:g}s")
            time.sleep(_DRAIN_POLL_S)

    def _read_all(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                  deadline: float) -> dict[str, str]:
        """Every wanted attempt's record on the topic from ``since_ms`` to its end; raises
        NotFenced unless the whole range was read by ``deadline``."""
        import pulsar

        client = self._client_now()
        found: dict[str, str] = {}
        for partition in client.get_topic_partitions(self.topic):
            reader = client.create_reader(partition, pulsar.MessageId.earliest)
            try:
                reader.seek(since_ms)
                while has_message_available(reader, deadline):
                    if time.monotonic() > deadline:
                        raise NotFenced(f"{self.topic} not read to its end in "
                                        f"{self.scan_timeout_s:g}s")
                    try:
                        message = reader.read_next(timeout_millis=_READ_WAIT_MS)
                    except pulsar.Timeout:
                        continue
                    properties = message.properties()
                    attempt_id = properties.get(PROPERTY_ATTEMPT_ID)
                    if attempt_id in wanted and mac_accepted(
                            str(properties.get(PROPERTY_EVIDENCE_MAC, "")), wanted[attempt_id]):
                        found[attempt_id] = message_evidence(self.topic, message.message_id())
            finally:
                with contextlib.suppress(Exception):
                    reader.close()
        return found

    def release(self, shard: str) -> None:
        if self._lock.acquire(timeout=self.scan_timeout_s):
            try:
                producer = self._owners.pop(shard, None)
            finally:
                self._lock.release()
            if producer is not None:
                with contextlib.suppress(Exception):
                    producer.close()

    def close(self) -> None:
        with self._lock:
            owners, self._owners = list(self._owners.values()), {}
        for producer in owners:
            with contextlib.suppress(Exception):
                producer.close()
        super().close()


