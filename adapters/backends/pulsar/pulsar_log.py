"""A Shard Log on one partition of a partitioned Pulsar Command Topic.

Shard ``n`` reads and writes ``<topic>-partition-<n>``, created with infinite retention
(``pulsar_command_topic``): the log is the source of truth for replay. Positions are
sparse MessageIds (``pulsar_positions``); lag is the subscription backlog, not a
difference of positions. The Python client cannot read broker time, so ``append`` stamps
every message of a call with one *event time* from this host's clock, never earlier than
the latest stamp seen, and reads return it: replay is deterministic, but the clock-lead
check compares the engine with the appender's clock, not the broker's. Reads use one
Reader; ``has_message_available`` makes every returned append visible. ``append`` returns
after every send is acknowledged (``pulsar_log_append``). ``ack`` moves the durable
Failover subscription ``nereus-<partition>``, for monitoring only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from nereus.adapters.backends.pulsar.pulsar_client import (
    UNREACHABLE_RESULTS,
    TopicMisconfigured,
    admin_reason,
    admin_request,
    admin_topic_path,
    call_within,
    full_topic,
    is_pulsar_error,
    make_client,
    partition_topic,
    result_name,
    translate,
)
from nereus.adapters.backends.pulsar.pulsar_log_append import send_window
from nereus.adapters.backends.pulsar.pulsar_positions import (
    decode_position,
    encode_position,
    end_after,
)
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.errors import LogCorruption, NereusError

_READ_WAIT_MS: Final = 2_000
_RETRY_FIRST_S: Final = 0.05
_RETRY_MAX_S: Final = 1.0
# what a consumer or reader answers while its connection is being re-established
RECONNECTING: Final = UNREACHABLE_RESULTS - {"Timeout"}
T = TypeVar("T")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class PulsarShardLog:
    """One shard's log: partition ``partition`` of the partitioned topic ``topic``."""

    dense = False  # positions are packed MessageIds: increasing, with gaps between ledgers

    def __init__(
        self,
        service_url: str,
        topic: str,
        partition: int,
        *,
        admin_url: str = "http://127.0.0.1:8080",
        timeout_s: float = 30,
        max_pending: int = 1_000,
        client_log_path: str | None = None,
    ) -> None:
        self.service_url = service_url
        self.admin_url = admin_url
        self.topic = full_topic(topic)
        self.partition = partition
        self.partition_topic = partition_topic(topic, partition)
        self.description = f"pulsar:{self.partition_topic}"
        self.subscription = f"nereus-{partition}"
        self.timeout_s = timeout_s
        self.max_pending = max_pending
        self.ack_failures = 0
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._last_ms = 0
        self._tail_ms_known = False
        self._acked = -1
        self._reader: Any = None
        self._reader_next = -1
        self._closed = False
        self._client = make_client(service_url, timeout_s=timeout_s, log_path=client_log_path)
        try:
            self._producer, self._cursor = call_within(
                timeout_s, self._open, client=self._client, service_url=service_url,
                doing=f"opening shard log {self.partition_topic}")
        except BaseException as exc:
            with contextlib.suppress(Exception):  # already closed by call_within's deadline
                self._client.close()
            if isinstance(exc, Exception) and is_pulsar_error(exc):
                raise self._fail(exc, "opening the shard log") from None
            raise

    def _open(self) -> tuple[Any, Any]:
        import pulsar

        partitions = self._client.get_topic_partitions(self.topic)
        if partitions == [self.topic] or self.partition >= len(partitions):
            count = 0 if partitions == [self.topic] else len(partitions)
            raise TopicMisconfigured(
                f"Pulsar topic {self.topic} has {count} partition(s), so there is no "
                f"partition {self.partition} for this shard",
                hint="create the Command Topic first (`nereus init --log pulsar`, or "
                "ensure_partitioned_topic)")
        producer = self._client.create_producer(
            self.partition_topic,
            send_timeout_millis=max(1, int(self.timeout_s * 1000)),
            block_if_queue_full=False,
            batching_enabled=False,  # one message = one entry: positions are unique
            max_pending_messages=self.max_pending,
        )
        cursor = self._client.subscribe(
            self.partition_topic, self.subscription,
            consumer_type=pulsar.ConsumerType.Failover,  # several log objects may ack
            receiver_queue_size=0,  # never prefetch: the consumer only acks and asks
            initial_position=pulsar.InitialPosition.Earliest,
        )
        return producer, cursor

    def _fail(self, exc: BaseException, doing: str) -> NereusError:
        return translate(exc, self.service_url, f"{doing} on {self.partition_topic}")

    def _retrying(self, doing: str, call: Callable[[], T]) -> T:
        """``call()``, retried while the client reconnects (a topic unload or broker
        restart), until ``timeout_s`` has passed; then the last error, translated."""
        deadline = time.monotonic() + self.timeout_s
        pause = _RETRY_FIRST_S
        while True:
            try:
                return call()
            except Exception as exc:
                if isinstance(exc, NereusError):
                    raise
                if not is_pulsar_error(exc):
                    raise
                if (result_name(exc) not in RECONNECTING
                        or time.monotonic() + pause >= deadline):
                    raise self._fail(exc, doing) from None
            time.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX_S)

    # writing ------------------------------------------------------------------------------
    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Send ``payloads`` in order; receipts only once the broker acknowledged them all."""
        if not payloads:
            return []
        with self._write_lock:
            stamp = max(_wall_ms(), self._floor_ms())
            receipts: list[Receipt] = []
            for start in range(0, len(payloads), self.max_pending):
                positions = send_window(
                    self._producer, payloads[start:start + self.max_pending], stamp=stamp,
                    total=len(payloads), timeout_s=self.timeout_s,
                    service_url=self.service_url, topic=self.partition_topic)
                receipts += [Receipt(position, stamp) for position in positions]
            self._last_ms = stamp
            return receipts

    def _floor_ms(self) -> int:
        """The latest stamp seen; on first use, the stamp of the log's last record."""
        if not self._tail_ms_known:
            last = self._retrying("asking for the last message id",
                                  self._cursor.get_last_message_id)
            if last.ledger_id() >= 0 and last.entry_id() >= 0:
                stamp = self._retrying("reading the last record's time",
                                       lambda: self._stamp_of_entry(last))
                self._last_ms = max(self._last_ms, stamp)
            self._tail_ms_known = True
        return self._last_ms

    def _stamp_of_entry(self, message_id: Any) -> int:
        """The stamp of the record at ``message_id``, read with a reader of its own."""
        reader = self._client.create_reader(self.partition_topic, message_id,
                                            start_message_id_inclusive=True)
        try:
            return self._record(reader.read_next(timeout_millis=_READ_WAIT_MS)).broker_ms
        finally:
            reader.close()

    # reading ------------------------------------------------------------------------------
    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` records with positions >= ``from_position``, in order.

        Returns what is available now: it never waits for records that were not appended.
        """
        if max_records <= 0:
            return []
        with self._read_lock:
            return self._retrying(f"reading from position {from_position}",
                                  lambda: self._read_once(from_position, max_records))

    def _read_once(self, from_position: int, max_records: int) -> list[LogRecord]:
        import pulsar

        out: list[LogRecord] = []
        try:
            reader = self._reader
            if reader is None or self._reader_next != from_position:
                reader = self._open_reader(from_position)
            while len(out) < max_records:
                if not reader.has_message_available():
                    break
                try:
                    message = reader.read_next(timeout_millis=_READ_WAIT_MS)
                except pulsar.Timeout:
                    break
                record = self._record(message)
                if record.position >= from_position:
                    out.append(record)
        except BaseException:
            self._drop_reader()  # the next attempt starts again at from_position
            raise
        self._reader_next = out[-1].position + 1 if out else from_position
        return out

    def _open_reader(self, from_position: int) -> Any:
        import pulsar

        self._drop_reader()
        ledger_id, entry_id = decode_position(from_position)
        self._reader = self._client.create_reader(
            self.partition_topic,
            pulsar.MessageId(self.partition, ledger_id, entry_id, -1),
            start_message_id_inclusive=True,
        )
        self._reader_next = from_position
        return self._reader

    def _drop_reader(self) -> None:
        reader, self._reader, self._reader_next = self._reader, None, -1
        if reader is not None:
            # a reader that cannot close is discarded all the same
            with contextlib.suppress(Exception):
                reader.close()

    def _record(self, message: Any) -> LogRecord:
        message_id = message.message_id()
        if message_id.batch_index() >= 0:
            raise LogCorruption(
                f"{self.partition_topic}: entry {message_id.ledger_id()}:"
                f"{message_id.entry_id()} is a batch; a Shard Log entry holds one record "
                "(was the topic written by another producer?)",
                path=self.partition_topic, offset=-1)
        stamp = message.event_timestamp() or message.publish_timestamp()
        self._last_ms = max(self._last_ms, stamp)
        return LogRecord(encode_position(message_id.ledger_id(), message_id.entry_id()),
                         stamp, message.data())

    def end_position(self) -> int:
        """One past the last record (0 for a topic that never held one)."""
        last = self._retrying("asking for the last message id",
                              self._cursor.get_last_message_id)
        return end_after(last.ledger_id(), last.entry_id())

    # acknowledging ------------------------------------------------------------------------
    def ack(self, position: int) -> None:
        """Move the ``nereus-<partition>`` cursor past ``position`` (monitoring only)."""
        import pulsar

        if position <= self._acked:
            return
        ledger_id, entry_id = decode_position(position)
        try:
            self._cursor.acknowledge_cumulative(
                pulsar.MessageId(self.partition, ledger_id, entry_id, -1))
        except Exception:  # the applied position in RocksDB is the truth; the next ack
            self.ack_failures += 1  # covers this one
            return
        self._acked = position

    def backlog(self) -> int | None:
        """Messages after the ``nereus-<partition>`` cursor, from the admin API (None if the
        subscription is not there yet)."""
        path = f"admin/v2/{admin_topic_path(self.partition_topic)}/stats"
        status, body = admin_request(self.admin_url, "GET", path, timeout_s=self.timeout_s)
        if status != 200 or not isinstance(body, dict):
            raise NereusError(f"Pulsar admin at {self.admin_url}: no stats for "
                              f"{self.partition_topic}: HTTP {status}: {admin_reason(body)}")
        subscription = body.get("subscriptions", {}).get(self.subscription)
        return None if subscription is None else int(subscription.get("msgBacklog", 0))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._read_lock:
            self._drop_reader()
        for handle in (self._cursor, self._producer):
            # closing is best effort; the client below goes anyway
            with contextlib.suppress(Exception):
                handle.close()
        # already closed, or the broker is gone: nothing to keep
        with contextlib.suppress(Exception):
            self._client.close()
