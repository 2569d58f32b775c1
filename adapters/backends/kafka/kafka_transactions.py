"""A Kafka lane that fences its writers (``[lanes.NAME] fencing = true``): one
transactional producer per shard owner (``fencing.py``; ``docs/rules.md`` §10).

``transactional.id`` is ``nereus.<topic>.<route>.<partition>``, the same for every owner
of the shard, so the next owner's ``init_transactions`` fences the old producer (its
sends and commits fail from then on) and completes its open transaction (aborted, unless
its commit had already begun). Each publish batch of one shard is one transaction:
committed -> PUBLISHED (the delivery reports' offsets); aborted -> NOT_PUBLISHED
RETRIABLE (a read_committed consumer never sees it); anything else UNKNOWN. Consumers of
such a lane must read with ``isolation.level=read_committed``: a read_uncommitted one
sees aborted records too. ``fence`` is that ``init_transactions``, then a read_committed
scan from the orphans' admission (less a minute) to the high watermarks read after it,
once the last stable offsets have passed them: a record found is PUBLISHED, an attempt
absent NOT_PUBLISHED. A request that names no shard goes through the idempotent producer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nereus.adapters.backends.destination.fencing import Fenced, NotFenced, absent_evidence
from nereus.adapters.backends.destination.protocol import (
    DestinationClosed,
    PublishRequest,
    PublishResult,
)
from nereus.adapters.backends.kafka.kafka_client import client_config, close_consumer
from nereus.adapters.backends.kafka.kafka_destination import (
    _FLUSH_GRACE_S,
    KafkaDestination,
    _Report,
)
from nereus.adapters.backends.kafka.kafka_evidence import evidence_of, scan_topic
from nereus.errors import NereusError, NotFound
from nereus.evidence_mac import ExpectedMac
from nereus.records import Disposition, Outcome

if TYPE_CHECKING:
    from confluent_kafka import Producer

_STABLE_POLL_S = 0.05
_FAR_FUTURE_MS = 2**62


def transactional_id(topic: str, shard: str) -> str:
    return f"nereus.{topic}.{shard.replace('/', '.')}"


class TransactionalKafkaDestination(KafkaDestination):
    """A ``KafkaDestination`` whose shard requests go through one transaction a batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owners: dict[str, Producer] = {}  # shard -> its initialised producer

    def _owner(self, shard: str) -> Producer:
        """The shard's transactional producer, made and initialised (which fences every
        earlier one) on first use. Raises KafkaException."""
        producer = self._owners.get(shard)
        if producer is None:
            from confluent_kafka import Producer

            producer = Producer({**self._producer_config,
                                 "transactional.id": transactional_id(self.topic, shard)})
            producer.init_transactions(self.timeout_s)
            self._owners[shard] = producer
        return producer

    def _publish(self, requests: Sequence[PublishRequest],
                 now_ms: Callable[[], int]) -> list[PublishResult]:
        plain = [r for r in requests if not r.shard]
        by_shard: dict[str, list[PublishRequest]] = {}
        for request in requests:
            if request.shard:
                by_shard.setdefault(request.shard, []).append(request)
        results = super()._publish(plain, now_ms) if plain else []
        for shard, batch in by_shard.items():
            results += self._transaction(shard, batch, now_ms)
        return results

    def _transaction(self, shard: str, requests: list[PublishRequest],
                     now_ms: Callable[[], int]) -> list[PublishResult]:
        """One transaction of ``shard``'s requests, each classified (module docstring)."""
        from confluent_kafka import KafkaException

        def every(outcome: Outcome, disposition: Disposition, why: str) -> list[PublishResult]:
            return [PublishResult(r.attempt_id, outcome, disposition,
                                  f"kafka:{self.topic}: {why}") for r in requests]

        if self._closed:
            return every(Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                         f"destination {self.name} is closed: nothing was sent")
        if not self._topic_ready:
            try:
                self._ensure_topic()
            except NereusError as exc:
                return every(Outcome.NOT_PUBLISHED, Disposition.PERMANENT if isinstance(
                    exc, NotFound) else Disposition.LANE_UNAVAILABLE,
                    f"nothing was sent: {exc.message}")
        try:
            producer = self._owner(shard)
            producer.begin_transaction()
        except KafkaException as exc:
            self._owners.pop(shard, None)
            return every(Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                         f"no transaction began ({exc}): nothing was sent")
        published_at = now_ms()
        reports: dict[int, _Report] = {}
        refused: dict[int, PublishResult] = {}
        for index, request in enumerate(requests):
            if (verdict := self._produce(producer, request, index, reports)) is not None:
                refused[index] = verdict
        if refused:
            aborted = self._abort(shard, producer, requests, "a record was refused by produce()")
            return [refused.get(i, result) for i, result in enumerate(aborted)]
        try:
            producer.commit_transaction(self.timeout_s + _FLUSH_GRACE_S)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                return self._abort(shard, producer, requests, f"the commit failed ({error})")
            self._owners.pop(shard, None)  # fenced, fatal or unanswered: a new one next time
            return every(Outcome.UNKNOWN, Disposition.NONE,
                         f"the transaction's commit did not answer ({error}); it may have "
                         "committed")
        return [self._committed(r, reports.get(i), published_at)
                for i, r in enumerate(requests)]

    def _abort(self, shard: str, producer: Producer, requests: list[PublishRequest],
               why: str) -> list[PublishResult]:
        from confluent_kafka import KafkaException

        try:
            producer.abort_transaction(self.timeout_s)
        except KafkaException as exc:
            self._owners.pop(shard, None)
            return [PublishResult(r.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                                  f"kafka:{self.topic}: {why}, and the abort failed ({exc})")
                    for r in requests]
        return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                              f"kafka:{self.topic}: {why}; the transaction was aborted "
                              "(no read_committed consumer sees it)") for r in requests]

    def _committed(self, request: PublishRequest, report: _Report | None,
                   published_at: int) -> PublishResult:
        if report is None or report.error is not None:  # a commit implies every report
            return PublishResult(request.attempt_id, Outcome.PUBLISHED, Disposition.NONE,
                                 f"kafka:{self.topic}: in a committed transaction")
        msg = report.message
        kind, stamp = msg.timestamp()
        return PublishResult(request.attempt_id, Outcome.PUBLISHED, Disposition.NONE,
                             evidence_of(self.topic, msg.partition(), msg.offset()),
                             stamp if kind and stamp > 0 else published_at)

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        """Committed records only: an aborted transaction's record is no evidence."""
        if self._closed:
            raise DestinationClosed(f"destination {self.name} is closed: no evidence scan")
        return scan_topic(self.bootstrap, self.client_id, self.topic, self.timeout_s, wanted,
                          since_ms, until_ms, committed=True)

    # fencing ----------------------------------------------------------------------------
    def fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        from confluent_kafka import KafkaException

        if not self._lock.acquire(timeout=self.timeout_s):
            raise NotFenced(f"a publish to kafka:{self.topic} is still running")
        try:
            if self._closed:
                raise NotFenced(f"destination {self.name} is closed")
            self._owners.pop(shard, None)
            try:
                self._owner(shard)  # init_transactions: the fence
                ends = self._stable_ends()
                found = scan_topic(self.bootstrap, self.client_id, self.topic,
                                   self.timeout_s, wanted, since_ms, _FAR_FUTURE_MS,
                                   committed=True) if wanted else {}
            except (KafkaException, NereusError) as exc:
                raise NotFenced(f"kafka:{self.topic}: {exc}") from None
        finally:
            self._lock.release()
        how = (f"transactional.id {transactional_id(self.topic, shard)} initialised (every "
               f"earlier producer of the shard fenced, its open transaction ended); "
               f"kafka:{self.topic} read_committed up to {ends} and no committed record "
               "carries the attempt")
        return Fenced(found, absent_evidence("kafka transaction", how))

    def _stable_ends(self) -> dict[int, int]:
        """Each partition's high watermark now, once the last stable offset has passed it
        (every transaction that wrote below it has ended). Raises NotFenced."""
        from confluent_kafka import Consumer, TopicPartition

        clients = {level: Consumer(client_config(self.bootstrap, self.client_id, {
            "group.id": f"nereus-fence-{self.topic}", "enable.auto.commit": False,
            "isolation.level": level})) for level in ("read_uncommitted", "read_committed")}
        try:
            raw, stable = clients["read_uncommitted"], clients["read_committed"]
            topic = raw.list_topics(topic=self.topic, timeout=self.timeout_s).topics[self.topic]
            deadline = time.monotonic() + self.timeout_s
            ends: dict[int, int] = {}
            for partition in sorted(topic.partitions):
                where = TopicPartition(self.topic, partition)
                high = raw.get_watermark_offsets(where, timeout=self.timeout_s, cached=False)[1]
                while stable.get_watermark_offsets(where, timeout=self.timeout_s,
                                                   cached=False)[1] < high:
                    if time.monotonic() > deadline:
                        raise NotFenced(f"kafka:{self.topic}/{partition}: the last stable "
                                        f"offset did not reach {high} in {self.timeout_s:g}s")
                    time.sleep(_STABLE_POLL_S)
                ends[partition] = high
            return ends
        finally:
            for client in clients.values():
                close_consumer(client, f"the fence of {self.topic}", 1.0)

    def release(self, shard: str) -> None:
        if self._lock.acquire(timeout=self.timeout_s):
            try:
                self._owners.pop(shard, None)  # the next owner's init fences what is left
            finally:
                self._lock.release()

    def close(self) -> None:
        super().close()
        self._owners.clear()
