"""The Kafka Shard Log passes the Shard Log contract against a real broker, and more.

The broker is Apache Kafka (KRaft, single node) started by ``scripts/services up kafka``
through the session fixture in ``tests/integration/kafka_service.py``; if it cannot be
started these tests fail and say why, they never skip. Every test gets its own topic,
named from the test's ``tmp_path`` (so the contract's re-open tests find the same one)
plus a token of this session (so an old broker's topics never collide), and deleted after.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from nereus.adapters.backends.kafka.kafka_client import TopicMisconfigured
from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
from nereus.adapters.backends.kafka.kafka_log_append import KafkaAppendFailed
from nereus.errors import ExitCode, NotFound, ServiceUnreachable
from tests.integration.kafka_service import KafkaService, closed_port, kafka_service
from tests.integration.kafka_topic import create_topic
from tests.integration.shardlog_contract import ShardLogContract, payloads, read_all
from tests.polling import wait_until

__all__ = ["kafka_service"]  # the session fixture, imported so pytest finds it here

SESSION = uuid.uuid4().hex[:8]
TIMEOUT_S = 20.0


def topic_for(tmp_path: Path, suffix: str = "") -> str:
    """The test's topic: the same for the same ``tmp_path`` within this session."""
    digest = hashlib.blake2b(str(tmp_path).encode(), digest_size=6).hexdigest()
    return f"nereus-test-{SESSION}-{digest}{suffix}"


def delete_topics(bootstrap: str, topics: set[str]) -> None:
    if topics:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_topics(sorted(topics), operation_timeout=10).values():
            future.exception(10)  # a topic that was never created is fine


@pytest.fixture
def bootstrap(kafka_service: KafkaService) -> Iterator[str]:
    yield kafka_service.require()


@pytest.fixture
def topics(bootstrap: str) -> Iterator[set[str]]:
    """Names added here are deleted after the test."""
    made: set[str] = set()
    yield made
    delete_topics(bootstrap, made)


class TestKafkaShardLog(ShardLogContract):
    """Partition 0 of a fresh single-partition Command Topic keeps every contract promise."""

    @pytest.fixture(autouse=True)
    def _broker(self, bootstrap: str, topics: set[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics

    def make_log(self, tmp_path: Path) -> KafkaShardLog:
        topic = topic_for(tmp_path)
        self.topics.add(topic)
        return KafkaShardLog(self.bootstrap, topic, 0, timeout_s=TIMEOUT_S)


class TestKafkaShardLogLastPartition(ShardLogContract):
    """The contract again on partition 2 of a three-partition topic."""

    @pytest.fixture(autouse=True)
    def _broker(self, bootstrap: str, topics: set[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics

    def make_log(self, tmp_path: Path) -> KafkaShardLog:
        topic = topic_for(tmp_path)
        self.topics.add(topic)
        return KafkaShardLog(self.bootstrap, topic, 2, partitions=3, timeout_s=TIMEOUT_S)


# Kafka specifics -------------------------------------------------------------------------
def test_partitions_of_one_topic_are_separate_logs(
    bootstrap: str, topics: set[str], tmp_path: Path
) -> None:
    """Two shards on one Command Topic each see only their own partition's records."""
    topic = topic_for(tmp_path)
    topics.add(topic)
    zero = KafkaShardLog(bootstrap, topic, 0, partitions=2, timeout_s=TIMEOUT_S)
    one = KafkaShardLog(bootstrap, topic, 1, partitions=2, timeout_s=TIMEOUT_S)
    try:
        zero.append(payloads("zero", 3))
        one.append(payloads("one", 5))
        assert [r.payload for r in read_all(zero)] == payloads("zero", 3)
        assert [r.payload for r in read_all(one)] == payloads("one", 5)
        assert (zero.end_position(), one.end_position()) == (3, 5)
    finally:
        zero.close()
        one.close()


def test_receipt_time_is_the_brokers_log_append_time(
    bootstrap: str, topics: set[str], tmp_path: Path
) -> None:
    """The topic is created with LogAppendTime, and receipts carry that broker time."""
    topic = topic_for(tmp_path)
    topics.add(topic)
    log = KafkaShardLog(bootstrap, topic, 0, timeout_s=TIMEOUT_S)
    try:
        before = time.time_ns() // 1_000_000
        receipts = log.append(payloads("t", 4))
        after = time.time_ns() // 1_000_000
        assert all(before - 1_000 <= r.broker_ms <= after + 1_000 for r in receipts)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # third-party types: confluent_kafka.admin does not re-export them
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ConfigResource,
            ResourceType,
        )

        (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        settings = future.result(10)
        assert settings["message.timestamp.type"].value == "LogAppendTime"
        assert settings["min.insync.replicas"].value == "1"
    finally:
        log.close()


def test_ack_commits_the_next_offset_for_the_shards_group(
    bootstrap: str, topics: set[str], tmp_path: Path
) -> None:
    """ack(p) commits p + 1 for group nereus-<topic>-<partition>, visible to lag tools."""
    topic = topic_for(tmp_path)
    topics.add(topic)
    log = KafkaShardLog(bootstrap, topic, 0, timeout_s=TIMEOUT_S)
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": f"nereus-{topic}-0"})
    try:
        log.append(payloads("a", 6))
        log.ack(4)
        offsets: list[int] = []

        def committed_five() -> bool:
            (committed,) = watcher.committed([TopicPartition(topic, 0)], timeout=5)
            offsets.append(committed.offset)
            if committed.offset != 5:
                log.read(0, 1)  # serves the asynchronous commit's callback
            return committed.offset == 5

        wait_until("offset 5 committed for the group", committed_five, 10, interval_s=0.05,
                   seen=lambda: offsets[-1])
    finally:
        watcher.close()
        log.close()


def test_existing_topic_is_checked_not_recreated(
    bootstrap: str, topics: set[str], tmp_path: Path
) -> None:
    """An existing CreateTime topic is refused (its times would be the producer's clock), one
    with too few partitions is refused, a missing one with create=False is NotFound."""
    create_time = topic_for(tmp_path, "-ct")
    small = topic_for(tmp_path, "-small")
    missing = topic_for(tmp_path, "-missing")
    topics.update({create_time, small, missing})
    create_topic(bootstrap, create_time, config={"message.timestamp.type": "CreateTime"})
    create_topic(bootstrap, small, 2, config={"message.timestamp.type": "LogAppendTime"})

    with pytest.raises(TopicMisconfigured, match="LogAppendTime") as caught:
        KafkaShardLog(bootstrap, create_time, 0, timeout_s=TIMEOUT_S)
    assert create_time in caught.value.message
    assert caught.value.hint and "message.timestamp.type=LogAppendTime" in caught.value.hint

    with pytest.raises(TopicMisconfigured, match=r"has 2 partition\(s\); 4 are needed"):
        KafkaShardLog(bootstrap, small, 3, partitions=4, timeout_s=TIMEOUT_S)
    fits = KafkaShardLog(bootstrap, small, 1, partitions=2, timeout_s=TIMEOUT_S)
    fits.close()

    with pytest.raises(NotFound, match="does not exist"):
        KafkaShardLog(bootstrap, missing, 0, create=False, timeout_s=TIMEOUT_S)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert missing not in admin.list_topics(timeout=10).topics  # and nothing created it


class AssignRecorder:
    """A consumer that records every assignment and passes everything on."""

    def __init__(self, inner: Consumer) -> None:
        self.inner = inner
        self.assigned: list[list[tuple[int, int]]] = []

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.append([(p.partition, p.offset) for p in partitions])
        self.inner.assign(partitions)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_reads_never_position_the_consumer_outside_the_retained_range(
    bootstrap: str, topics: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read beyond the end returns [] without assigning the consumer there; a read from
    below the retained start is assigned at the start and returns from it (the runner sees
    the gap). An out-of-range assignment would start an offset reset, and closing during
    one can deadlock librdkafka (issue 4514)."""
    topic = topic_for(tmp_path)
    topics.add(topic)
    log = KafkaShardLog(bootstrap, topic, 0, timeout_s=TIMEOUT_S)
    try:
        log.append(payloads("r", 5))
        consumer = log._consumer
        assert consumer is not None
        recorder = AssignRecorder(consumer)
        monkeypatch.setattr(log, "_consumer", recorder)
        assert log.read(100, 10) == []
        assert recorder.assigned == []
        assert [r.position for r in log.read(5, 10)] == []
        assert recorder.assigned == [[(0, 5)]]

        admin = AdminClient({"bootstrap.servers": bootstrap})
        (future,) = admin.delete_records([TopicPartition(topic, 0, 2)]).values()
        future.result(10)
        assert [r.position for r in read_all(log, 0)] == [2, 3, 4]
        assert recorder.assigned[1:] == [[(0, 2)]]
    finally:
        log.close()


def test_close_gives_up_on_a_consumer_that_does_not_close(
    bootstrap: str, topics: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A consumer whose close hangs (as librdkafka's can, issue 4514) holds close() only for
    the bounded wait, and the abandonment is logged as an error naming the log."""
    from nereus.adapters.backends.kafka import kafka_log

    topic = topic_for(tmp_path)
    topics.add(topic)
    log = KafkaShardLog(bootstrap, topic, 0, timeout_s=TIMEOUT_S)
    real = log._consumer
    assert real is not None
    release = threading.Event()

    class Stuck:
        def close(self) -> None:
            release.wait()

    monkeypatch.setattr(kafka_log, "CLOSE_WAIT_S", 0.3)
    monkeypatch.setattr(log, "_consumer", Stuck())
    try:
        started = time.monotonic()
        log.close()
        assert time.monotonic() - started < 0.3 + 5  # the wait, not forever
        assert f"kafka:{topic}/0 did not close within 0.3s" in caplog.text
    finally:
        release.set()
        real.close()


def test_failed_append_raises_and_gives_no_receipt(
    bootstrap: str, topics: set[str], tmp_path: Path
) -> None:
    """A record the broker refuses (bigger than the topic's max.message.bytes) fails the whole
    append with KafkaAppendFailed, an OSError (the shard loop retries it) and a
    ServiceUnreachable (exit 5) naming the broker; the log stays usable."""
    topic = topic_for(tmp_path)
    topics.add(topic)
    create_topic(bootstrap, topic, config={"message.timestamp.type": "LogAppendTime",
                                           "max.message.bytes": "2000"})
    log = KafkaShardLog(bootstrap, topic, 0, timeout_s=TIMEOUT_S)
    try:
        with pytest.raises(KafkaAppendFailed, match="MSG_SIZE_TOO_LARGE") as caught:
            log.append([b"small", b"B" * 5_000])
        assert isinstance(caught.value, OSError)
        assert isinstance(caught.value, ServiceUnreachable)
        assert caught.value.exit_code == ExitCode.SERVICE_UNREACHABLE
        assert bootstrap in caught.value.message and "no receipts" in caught.value.message
        receipts = log.append([b"fits"])
        assert [r.payload for r in read_all(log, receipts[0].position)] == [b"fits"]
    finally:
        log.close()


def test_unreachable_broker_is_service_unreachable_within_the_timeout() -> None:
    """Opening a log on a port nobody listens on raises ServiceUnreachable (exit 5) naming
    the bootstrap address, within the timeout rather than hanging."""
    bootstrap = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(ServiceUnreachable) as caught:
        KafkaShardLog(bootstrap, "nereus-nowhere", 0, timeout_s=1.5)
    elapsed = time.monotonic() - started
    assert caught.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    assert int(caught.value.exit_code) == 5
    assert bootstrap in caught.value.message
    assert elapsed < 5, f"took {elapsed:.1f}s to report the broker unreachable"
