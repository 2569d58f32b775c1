"""The Kafka destination against a real broker.

How it classifies librdkafka's codes is ``test_kafka_verdicts.py`` (no broker needed).
Here everything runs against the broker from ``scripts/services up kafka`` (session fixture
in ``tests/integration/kafka_service.py``; it fails, never skips, when the broker cannot
start): records come back with key, value and headers at the offsets the evidence names, a
record the broker refuses is NOT_PUBLISHED PERMANENT while its batch-mates still publish,
``scan_evidence`` finds what was published and only that, and an unreachable broker is
reported fast. ``TestKafkaDestination`` runs the destination contract
(``tests/integration/destination_contract.py``) on a two-partition topic.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.kafka.kafka_destination import KafkaDestination
from nereus.adapters.backends.kafka.kafka_evidence import (
    ATTEMPT_ID_HEADER,
    DELAY_MESSAGE_ID_HEADER,
    EVIDENCE_MAC_HEADER,
)
from nereus.config import LaneSettings
from nereus.errors import ExitCode, ServiceUnreachable
from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome
from tests.integration.destination_contract import DestinationContract, Down
from tests.integration.kafka_service import (
    KafkaService,
    closed_port,
    kafka_bootstrap,
    kafka_service,
)
from tests.integration.kafka_topic import create_topic

__all__ = ["kafka_bootstrap", "kafka_service"]  # fixtures, imported so pytest finds them

EVIDENCE = re.compile(r"^kafka:(?P<topic>[\w.-]+)/(?P<partition>\d+)@(?P<offset>\d+)$")
SESSION = uuid.uuid4().hex[:8]
TIMEOUT_S = 15.0

P, N, U = Outcome.PUBLISHED, Outcome.NOT_PUBLISHED, Outcome.UNKNOWN


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def request(attempt: str, *, key: str | None = "k", payload: bytes = b"payload",
            headers: dict[str, str] | None = None, message: str | None = None) -> PublishRequest:
    template = PublishTemplate(
        delay_message_id=message or f"m-{attempt}", generation=1, lane="kafka-lane",
        deliver_at_ms=1_000, action_at_ms=1_000, key=key, headers=headers or {},
        payload=payload)
    return PublishRequest(attempt, template, mac=mac_of(attempt))


def mac_of(attempt: str) -> str:
    """The evidence MAC a test request carries (any fixed text per attempt will do here)."""
    return f"mac-{attempt}"


def macs(*attempts: str) -> dict[str, str]:
    return {attempt: mac_of(attempt) for attempt in attempts}


# against the broker ---------------------------------------------------------------------
@pytest.fixture
def bootstrap(kafka_service: KafkaService) -> str:
    return kafka_service.require()


@pytest.fixture
def topic(bootstrap: str) -> Iterator[str]:
    """A fresh topic name (created by whoever uses it), deleted afterwards."""
    name = f"nereus-dest-{SESSION}-{uuid.uuid4().hex[:8]}"
    yield name
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([name], operation_timeout=10)[name].exception(10)


@pytest.fixture
def destinations() -> Iterator[Callable[..., KafkaDestination]]:
    """Makes destinations and closes them after the test."""
    made: list[KafkaDestination] = []

    def make(*args: Any, **kwargs: Any) -> KafkaDestination:
        destination = KafkaDestination(*args, **kwargs)
        made.append(destination)
        return destination

    yield make
    for destination in made:
        destination.close()


def evidence_field(result: PublishResult, field: str) -> str:
    """A field of PUBLISHED evidence kafka:<topic>/<partition>@<offset>."""
    found = EVIDENCE.match(result.evidence)
    assert found is not None, result.evidence
    return found[field]


def consume(bootstrap: str, topic: str, results: list[PublishResult]) -> dict[str, Message]:
    """The records at the evidence offsets, by attempt id."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nereus-test-reader",
                         "enable.auto.commit": False})
    wanted: dict[tuple[int, int], str] = {}
    for result in results:
        found = EVIDENCE.match(result.evidence)
        assert found and found["topic"] == topic, result.evidence
        wanted[(int(found["partition"]), int(found["offset"]))] = result.attempt_id
    starts: dict[int, int] = {}
    for partition, offset in wanted:
        starts[partition] = min(offset, starts.get(partition, offset))
    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    got: dict[str, Message] = {}
    deadline = time.monotonic() + 20
    try:
        while len(got) < len(wanted) and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.5):
                assert msg.error() is None, msg.error()
                read_partition, read_offset = msg.partition(), msg.offset()
                attempt = (None if read_partition is None or read_offset is None
                           else wanted.get((read_partition, read_offset)))
                if attempt is not None:
                    got[attempt] = msg
    finally:
        consumer.close()
    assert len(got) == len(wanted), "not every published record could be read back"
    return got


def test_published_records_carry_key_value_and_headers_at_the_evidence_offsets(
    bootstrap: str, topic: str, destinations: Callable[..., KafkaDestination]
) -> None:
    """publish creates the topic, and each record is PUBLISHED with evidence
    kafka:<topic>/<partition>@<offset>; reading those offsets gives the key, the payload, the
    template's headers and the nereus ids (a template header with a reserved name dropped)."""
    destination = destinations("kafka-lane", bootstrap, topic, partitions=3,
                               timeout_s=TIMEOUT_S)
    requests = [
        request("a1", key="order-1", payload=b"first",
                headers={"trace": "t-1", ATTEMPT_ID_HEADER: "forged"}),
        request("a2", key=None, payload=bytes(range(256))),
        request("a3", key="order-1", payload=b"", headers={"x": "y"}, message="m-shared"),
    ]
    before = now_ms()
    results = destination.publish(requests, now_ms)
    assert [r.attempt_id for r in results] == ["a1", "a2", "a3"]
    assert all(r.outcome == P and r.disposition == Disposition.NONE for r in results), results
    for result in results:
        assert result.published_at_ms is not None
        assert before - 1_000 <= result.published_at_ms <= now_ms() + 1_000

    records = consume(bootstrap, topic, results)
    for req in requests:
        msg = records[req.attempt_id]
        template = req.template
        assert msg.value() == template.payload
        assert msg.key() == (None if template.key is None else template.key.encode())
        headers = msg.headers()
        expected = [(k, v.encode()) for k, v in template.headers.items()
                    if k != ATTEMPT_ID_HEADER]
        expected += [(DELAY_MESSAGE_ID_HEADER, template.delay_message_id.encode()),
                     (ATTEMPT_ID_HEADER, req.attempt_id.encode()),
                     (EVIDENCE_MAC_HEADER, req.mac.encode())]
        assert headers == expected
    # one key, one partition
    assert evidence_field(results[0], "partition") == evidence_field(results[2], "partition")


def test_too_large_is_not_published_permanent_and_its_batch_mates_still_publish(
    bootstrap: str, topic: str, destinations: Callable[..., KafkaDestination]
) -> None:
    """A record over the topic's max.message.bytes is refused by the broker with its whole
    batch: it is NOT_PUBLISHED PERMANENT, and the small records batched with it, re-sent
    alone, are PUBLISHED exactly once. One over the client's limit never leaves: PERMANENT."""
    create_topic(bootstrap, topic, config={"max.message.bytes": "4000"})
    destination = destinations("kafka-lane", bootstrap, topic, create_topic=False,
                               timeout_s=TIMEOUT_S)
    results = destination.publish([
        request("small-1", payload=b"s" * 100),
        request("big", payload=b"B" * 20_000),
        request("small-2", payload=b"t" * 100),
        request("huge", payload=b"H" * 2_000_000),
    ], now_ms)
    by_id = {r.attempt_id: r for r in results}
    assert (by_id["big"].outcome, by_id["big"].disposition) == (N, Disposition.PERMANENT)
    assert "MSG_SIZE_TOO_LARGE" in by_id["big"].evidence
    assert (by_id["huge"].outcome, by_id["huge"].disposition) == (N, Disposition.PERMANENT)
    assert by_id["small-1"].outcome == by_id["small-2"].outcome == P, results
    records = consume(bootstrap, topic, [by_id["small-1"], by_id["small-2"]])
    assert {m.value() for m in records.values()} == {b"s" * 100, b"t" * 100}
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "nereus-test-reader"})
    try:
        _, high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        reader.close()
    assert high == 2  # nothing else landed: the refused batch was not stored


def test_missing_topic_without_creation_is_permanent_and_probe_says_why(
    bootstrap: str, topic: str, destinations: Callable[..., KafkaDestination]
) -> None:
    """With create_topic off, a missing topic makes probe report it and publish answer
    NOT_PUBLISHED PERMANENT without sending; with creation on, probe creates the topic."""
    strict = destinations("kafka-lane", bootstrap, topic, create_topic=False,
                          timeout_s=TIMEOUT_S)
    reason = strict.probe()
    assert reason is not None and topic in reason and "does not exist" in reason
    (result,) = strict.publish([request("a1")], now_ms)
    assert (result.outcome, result.disposition) == (N, Disposition.PERMANENT)
    assert "nothing was sent" in result.evidence

    creating = destinations("kafka-lane", bootstrap, topic, timeout_s=TIMEOUT_S)
    assert creating.probe() is None
    assert strict.probe() is None
    (result,) = strict.publish([request("a2")], now_ms)
    assert result.outcome == P


def test_topic_deleted_under_the_destination_ends_in_not_published_permanent(
    bootstrap: str, topic: str, destinations: Callable[..., KafkaDestination]
) -> None:
    """Deleting the topic under a destination that has published to it: each record sent
    after the deletion is PUBLISHED only with an offset the broker acknowledged, otherwise
    UNKNOWN or a proven refusal, always naming the error; within a few records the client
    knows the topic is gone, and from then on every record is NOT_PUBLISHED PERMANENT
    (creation off) and probe says the topic does not exist."""
    create_topic(bootstrap, topic)
    destination = destinations("kafka-lane", bootstrap, topic, create_topic=False,
                               timeout_s=TIMEOUT_S)
    assert destination.publish([request("a1")], now_ms)[0].outcome == P
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(10)
    # The admin call returns once the controller has committed the deletion; the broker
    # applies it a moment later, so a record sent at once may still be appended (and
    # acknowledged). Usually it is refused and retried (_UNKNOWN_PARTITION: UNKNOWN, a first
    # try may have landed); sometimes librdkafka drops the partition while the request is in
    # flight (_DESTROY: UNKNOWN, it says nothing about the append).
    seen: list[PublishResult] = []
    for attempt in range(10):
        (result,) = destination.publish([request(f"a{attempt + 2}")], now_ms)
        seen.append(result)
        if result.outcome == N:
            break
        if result.outcome == P:
            assert re.fullmatch(rf"kafka:{re.escape(topic)}/0@\d+", result.evidence), result
        else:
            assert result.outcome == U, result
            assert re.match(rf"kafka:{re.escape(topic)}: _?[A-Z_]+: ", result.evidence), result
    assert seen[-1].outcome == N, seen
    assert seen[-1].disposition == Disposition.PERMANENT, seen
    assert "does not exist" in seen[-1].evidence, seen
    (later,) = destination.publish([request("after")], now_ms)
    assert (later.outcome, later.disposition) == (N, Disposition.PERMANENT), later
    assert "does not exist" in (destination.probe() or "")


def test_scan_evidence_finds_published_attempts_and_only_those(
    bootstrap: str, topic: str, destinations: Callable[..., KafkaDestination]
) -> None:
    """scan_evidence returns the publish evidence for attempts whose header and MAC are on
    the topic within the window; nothing for an attempt never sent, nothing before the
    window, nothing for a record with the attempt id but another MAC."""
    destination = destinations("kafka-lane", bootstrap, topic, partitions=2,
                               timeout_s=TIMEOUT_S)
    since = now_ms() - 1_000
    results = destination.publish([request(f"p{i}", key=f"k{i}") for i in range(6)], now_ms)
    assert all(r.outcome == P for r in results)
    until = now_ms() + 1_000
    evidence = {r.attempt_id: r.evidence for r in results}

    found = destination.scan_evidence(macs("p1", "p4", "never-sent"), since, until)
    assert found == {"p1": evidence["p1"], "p4": evidence["p4"]}
    assert destination.scan_evidence(macs("p2"), until + 60_000, until + 120_000) == {}
    assert destination.scan_evidence({}, since, until) == {}
    assert destination.scan_evidence({"p3": "not-its-mac"}, since, until) == {}


def test_unreachable_broker_is_reported_fast(
    destinations: Callable[..., KafkaDestination],
) -> None:
    """Nobody listening: probe gives a reason naming the bootstrap address, publish answers
    NOT_PUBLISHED LANE_UNAVAILABLE (nothing was produced) and scan_evidence raises
    ServiceUnreachable (exit 5), each within a few seconds."""
    bootstrap = f"127.0.0.1:{closed_port()}"
    destination = destinations("kafka-lane", bootstrap, "nereus-nowhere", timeout_s=1.5)

    started = time.monotonic()
    reason = destination.probe()
    assert reason is not None and bootstrap in reason and "unreachable" in reason
    assert time.monotonic() - started < 5

    started = time.monotonic()
    (result,) = destination.publish([request("a1")], now_ms)
    assert (result.outcome, result.disposition) == (N, Disposition.LANE_UNAVAILABLE)
    assert bootstrap in result.evidence
    assert time.monotonic() - started < 5

    started = time.monotonic()
    with pytest.raises(ServiceUnreachable) as caught:
        destination.scan_evidence(macs("a1"), 0, now_ms())
    assert caught.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    assert int(caught.value.exit_code) == 5
    assert bootstrap in caught.value.message
    assert time.monotonic() - started < 5


def test_an_evidence_reference_fetches_the_record_it_names(
    bootstrap: str, topic: str, destinations: Callable[..., KafkaDestination]
) -> None:
    """`attempt resolve --evidence kafka:TOPIC/PARTITION@OFFSET` reads exactly that record:
    its attempt id and evidence MAC; an offset past the end is NotFound."""
    from nereus.adapters.backends.destination.evidence_fetch import fetch_evidence
    from nereus.config import parse_config
    from nereus.errors import NotFound

    destination = destinations("kafka-lane", bootstrap, topic, partitions=2,
                               timeout_s=TIMEOUT_S)
    results = destination.publish([request(f"f{i}", key=f"k{i}") for i in range(4)], now_ms)
    lane = parse_config(f'[lanes.out]\ndestination = "kafka"\nbootstrap = "{bootstrap}"\n'
                        f'topic = "{topic}"\n').lanes["out"]
    for result in results:
        fetched = fetch_evidence(result.evidence, lane)
        assert (fetched.attempt_id, fetched.mac) == (result.attempt_id,
                                                     mac_of(result.attempt_id))
    with pytest.raises(NotFound):
        fetch_evidence(f"kafka:{topic}/0@999999", lane)


# the destination contract ----------------------------------------------------------------
class TestKafkaDestination(DestinationContract):
    """A two-partition topic per test (created by the destination, deleted after) keeps
    every promise of the destination contract; the unreachable broker is a closed port."""

    @pytest.fixture(autouse=True)
    def _broker(self, kafka_bootstrap: str) -> Iterator[None]:
        self.bootstrap = kafka_bootstrap
        self.topics: set[str] = set()
        yield
        if self.topics:
            admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
            for future in admin.delete_topics(sorted(self.topics),
                                              operation_timeout=10).values():
                future.exception(10)  # a topic never created is fine

    @staticmethod
    def topic_for(tmp_path: Path) -> str:
        """The test's topic: the same for the same ``tmp_path`` within this session."""
        digest = hashlib.blake2b(str(tmp_path).encode(), digest_size=6).hexdigest()
        return f"nereus-dest-contract-{SESSION}-{digest}"

    def make_destination(self, tmp_path: Path) -> KafkaDestination:
        topic = self.topic_for(tmp_path)
        self.topics.add(topic)
        return KafkaDestination("contract", self.bootstrap, topic, partitions=2,
                                timeout_s=TIMEOUT_S)

    def make_down(self, tmp_path: Path) -> Down:
        bootstrap = f"127.0.0.1:{closed_port()}"
        return Down(KafkaDestination("contract", bootstrap, self.topic_for(tmp_path),
                                     timeout_s=1.5), bootstrap)

    def lane_settings(self, tmp_path: Path) -> LaneSettings:
        return LaneSettings(name="contract", destination="kafka", bootstrap=self.bootstrap,
                            topic=self.topic_for(tmp_path))
