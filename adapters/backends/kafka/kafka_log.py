"""The Kafka Shard Log: one partition of a Command Topic per shard.

Positions are dense Kafka offsets; ``broker_ms`` is the record's timestamp, the broker's
persistence time (``LogAppendTime``, set with ``cleanup.policy=delete`` when the topic is
made or checked: ``kafka_command_topic``). Appends are ``kafka_log_append``. Metadata and
offset requests are bounded by ``timeout_s`` (an unreachable broker is
``ServiceUnreachable``, never a hang); a read is never positioned outside the retained
range and ``close_consumer`` bounds a close (librdkafka issue 4514 can deadlock one).
``ack`` commits ``p + 1`` for group ``nereus-<topic>-<partition>``, for lag tools only: the
applied position in RocksDB is the truth. ``confluent_kafka`` is imported in the constructor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from nereus.adapters.backends.kafka.kafka_client import (
    CLOSE_WAIT_S,
    LOG,
    admin_client,
    client_config,
    close_consumer,
    error_of,
    replica_count,
    topic_settings,
    translate,
    unreachable,
)
from nereus.adapters.backends.kafka.kafka_command_topic import KEEP_FOREVER, prepare_command_topic
from nereus.adapters.backends.kafka.kafka_log_append import KafkaAppender
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.errors import NereusError, UsageError

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

READ_POLL_S: Final = 0.05  # how long a read waits for records when the log may be at its end
FETCH_WAIT_MS: Final = 100  # the broker holds an empty fetch this long (bounds a re-seek)
_RETRY_WAIT_S: Final = 0.05
# answers while a partition's leadership settles (just after creation, or after a move)
_SETTLING: Final = frozenset({
    "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE", "_UNKNOWN_PARTITION",
})


class KafkaShardLog:
    """One shard's Shard Log: partition ``partition`` of the Command Topic ``topic``."""

    dense = True  # offsets of an idempotent, non-transactional producer are consecutive

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        *,
        partitions: int = 1,
        create: bool = True,
        client_id: str = "nereus",
        timeout_s: float = 30,
        retention_ms: int = KEEP_FOREVER,
        replication_factor: int | None = None,
        min_insync_replicas: int | None = None,
    ) -> None:
        if not 0 <= partition < partitions:
            raise UsageError(f"partition {partition} is not one of the topic's {partitions} "
                             f"partitions (0..{partitions - 1})")
        from confluent_kafka import Consumer

        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.timeout_s = timeout_s
        self.group_id = f"nereus-{topic}-{partition}"
        self.description = f"kafka:{topic}/{partition}"
        # made before the topic checks: the idempotent producer's ProducerId request then
        # runs meanwhile instead of delaying the first append by its 500 ms retry timer
        self._appender = KafkaAppender(bootstrap, topic, partition, client_id=client_id,
                                       timeout_s=timeout_s, description=self.description)
        self._consumer: Consumer | None = Consumer(client_config(bootstrap, client_id, {
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # reads are positioned inside the retained range (_seek); should retention pass
            # the position before the fetch, the consumer restarts at the retained start
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "on_commit": self._on_commit,
        }))
        self._read_lock = threading.Lock()
        self._next: int | None = None  # the position the consumer will deliver next
        self._acked = 0
        try:
            admin = admin_client(bootstrap, client_id)
            self._admin = admin
            prepare_command_topic(
                admin, bootstrap, topic, client_id=client_id, partitions=partitions,
                create=create, timeout_s=timeout_s, retention_ms=retention_ms,
                replication_factor=replication_factor,
                min_insync_replicas=min_insync_replicas)
        except BaseException:
            self.close()
            raise

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Produce ``payloads`` in order and return receipts once all are acknowledged."""
        return self._appender.append(payloads)

    # read -------------------------------------------------------------------------------
    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` records from ``from_position``, in order (maybe none)."""
        if max_records <= 0:
            return []
        with self._read_lock:
            consumer = self._consumer
            if consumer is None:
                raise NereusError(f"{self.description}: the log is closed")
            if self._next != from_position and not self._seek(consumer, from_position):
                return []  # beyond the end
            out = self._take(consumer, from_position, max_records)
            if not out and from_position < self.end_position():
                # records exist but were not fetched yet (a fresh seek): wait for them
                deadline = time.monotonic() + self.timeout_s
                while not out:
                    if time.monotonic() >= deadline:
                        raise unreachable(self.bootstrap, f"reading {self.description}",
                                          f"position {from_position} exists but could not "
                                          f"be fetched within {self.timeout_s:g}s")
                    out = self._take(consumer, from_position, max_records)
            if out:
                self._next = out[-1].position + 1
            return out

    def _seek(self, consumer: Consumer, from_position: int) -> bool:
        """Position the consumer for ``from_position``; False if it lies beyond the end.

        The consumer is only ever assigned inside the partition's range: an offset outside
        it makes librdkafka reset the position (``auto.offset.reset``), and closing while
        that reset is in flight can deadlock (see ``close_consumer``). Below the retained
        start it is assigned at the start (the runner sees the gap in the positions).
        """
        from confluent_kafka import TopicPartition

        start, end = self._watermarks()
        if from_position > end:
            self._next = None
            return False
        consumer.assign([TopicPartition(self.topic, self.partition,
                                        max(from_position, start))])
        self._next = from_position
        return True

    def _take(self, consumer: Consumer, from_position: int, max_records: int) -> list[LogRecord]:
        """What the consumer has now (waiting up to READ_POLL_S for the first record)."""
        first = consumer.poll(READ_POLL_S)
        if first is None:
            return []
        messages = [first]
        if max_records > 1:
            messages += consumer.consume(max_records - 1, timeout=0)
        out = []
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise translate(_exception(err), self.bootstrap,
                                    f"reading {self.description}")
                LOG.warning("kafka consumer error on %s: %s", self.description, err.str())
                continue
            offset = msg.offset()
            if offset is None or offset < from_position:
                continue  # after an offset reset to the start; never return them
            out.append(LogRecord(offset, msg.timestamp()[1], msg.value() or b""))
        return out

    def end_position(self) -> int:
        """The high watermark: the offset the next appended record will get."""
        return self._watermarks()[1]

    def _watermarks(self) -> tuple[int, int]:
        """(first retained offset, high watermark), asked of the partition's leader."""
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._consumer
        if consumer is None:
            raise NereusError(f"{self.description}: the log is closed")
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, self.partition),
                    timeout=max(0.1, deadline - time.monotonic()), cached=False)
                return int(low), int(high)
            except KafkaException as exc:
                # a partition's leader settles just after the topic is made (or moves):
                # NOT_LEADER_FOR_PARTITION and the like are retried until the deadline
                if error_of(exc)[0] not in _SETTLING or time.monotonic() >= deadline:
                    raise translate(exc, self.bootstrap,
                                    f"end offset of {self.description}") from None
            time.sleep(_RETRY_WAIT_S)

    def start_position(self) -> int:
        """The first retained offset (records below it were deleted by retention or prune)."""
        return self._watermarks()[0]

    def delete_before(self, position: int) -> list[str]:
        """Delete every record below ``position`` (``DeleteRecords``); what went, described.

        The caller checks the Recovery Floor first
        (``adapters.checkpoint_catalog.check_floor``): this never decides what may go, it only
        does it."""
        from confluent_kafka import KafkaException, TopicPartition

        start, end = self._watermarks()
        target = min(position, end)
        if target <= start:
            return []
        futures = self._admin.delete_records(
            [TopicPartition(self.topic, self.partition, target)],
            request_timeout=self.timeout_s, operation_timeout=self.timeout_s)
        try:
            for future in futures.values():
                future.result(timeout=self.timeout_s)
        except KafkaException as exc:
            raise translate(exc, self.bootstrap,
                            f"deleting records of {self.description} below {target}") from None
        except TimeoutError:
            raise unreachable(self.bootstrap, f"deleting records of {self.description}",
                              f"no answer within {self.timeout_s:g}s") from None
        return [f"{self.description} offsets {start}..{target - 1}"]

    def topic_config(self) -> dict[str, str]:
        """The Command Topic's effective configuration (for doctor)."""
        return topic_settings(self._admin, self.bootstrap, self.topic, self.timeout_s)

    def replication_factor(self) -> int:
        return replica_count(self._admin, self.bootstrap, self.topic, self.timeout_s)

    # ack and close ----------------------------------------------------------------------
    def ack(self, position: int) -> None:
        """Commit ``position + 1`` for the shard's consumer group (monitoring only)."""
        from confluent_kafka import KafkaException, TopicPartition

        offset = position + 1
        consumer = self._consumer
        if consumer is None or offset <= self._acked:
            return
        try:
            consumer.commit(offsets=[TopicPartition(self.topic, self.partition, offset)],
                            asynchronous=True)
        except KafkaException as exc:
            LOG.warning("commit of offset %d for group %s failed: %s", offset, self.group_id,
                        error_of(exc)[1])
            return
        self._acked = offset

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if err is not None:
            LOG.warning("commit for group %s failed: %s", self.group_id, err.str())

    def close(self) -> None:
        self._appender.close()
        with self._read_lock:
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            close_consumer(consumer, self.description, min(self.timeout_s, CLOSE_WAIT_S))


def _exception(err: KafkaError) -> BaseException:
    from confluent_kafka import KafkaException

    return KafkaException(err)
