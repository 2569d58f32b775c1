"""The Pulsar destination against a real broker: what it sends, when Pulsar delivers it, and
how every outcome is classified (the table in ``docs/outcomes-pulsar.md``; the verdicts
alone, without a broker, are ``test_pulsar_verdicts.py``).

The broker is Pulsar standalone from ``scripts/services up pulsar`` (session fixture in
``tests/integration/pulsar_service.py``) with strict delayed delivery; without it these
tests fail, never skip. Each test uses topics of its own and deletes them.
``TestPulsarDestination`` runs the destination contract
(``tests/integration/destination_contract.py``) on a two-partition topic.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.pulsar.pulsar_client import (
    admin_request,
    admin_topic_path,
    full_topic,
)
from nereus.adapters.backends.pulsar.pulsar_destination import PulsarDestination
from nereus.adapters.backends.pulsar.pulsar_evidence import (
    PROPERTY_ATTEMPT_ID,
    PROPERTY_DELAY_MESSAGE_ID,
    PROPERTY_EVIDENCE_MAC,
)
from nereus.config import LaneSettings
from nereus.errors import ServiceUnreachable
from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome
from tests.integration.destination_contract import DestinationContract, Down
from tests.integration.pulsar_service import (
    PulsarEndpoint,
    PulsarService,
    closed_port,
    pulsar_service,
    unique_topic,
)

__all__ = ["pulsar_service"]  # the session fixture, imported so pytest finds it here

EVIDENCE = re.compile(r"^pulsar:(?P<topic>\S+)@(?P<ledger>\d+):(?P<entry>\d+):(?P<part>-?\d+)$")
TOO_BIG = 6 << 20  # the broker's default maxMessageSize is 5 MiB


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def request(attempt_id: str, *, key: str | None = None, payload: bytes = b"hello",
            deliver_at_ms: int | None = None, headers: dict[str, str] | None = None
            ) -> PublishRequest:
    deliver_at = wall_ms() if deliver_at_ms is None else deliver_at_ms
    return PublishRequest(attempt_id, PublishTemplate(
        delay_message_id=f"msg-{attempt_id}", generation=1, lane="pulsar-lane",
        deliver_at_ms=deliver_at, action_at_ms=deliver_at, key=key,
        headers=headers or {}, payload=payload), mac=f"mac-{attempt_id}")


def macs(*attempts: str) -> dict[str, str]:
    """The evidence MACs test requests carry, as scan_evidence wants them."""
    return {attempt: f"mac-{attempt}" for attempt in attempts}


def outcomes(results: list[PublishResult]) -> list[tuple[Outcome, Disposition]]:
    return [(r.outcome, r.disposition) for r in results]


@pytest.fixture
def endpoint(pulsar_service: PulsarService) -> PulsarEndpoint:
    return pulsar_service.require()


@pytest.fixture
def make_topic(endpoint: PulsarEndpoint) -> Iterator[Callable[..., str]]:
    """Makes fresh topics (``partitions=0``: a plain topic, created by the first producer)
    and deletes them after the test."""
    made: list[tuple[str, bool]] = []

    def maker(partitions: int = 0) -> str:
        topic = full_topic(unique_topic("nereus-test-dest"))
        if partitions:
            status, body = admin_request(
                endpoint.admin_url, "PUT", f"admin/v2/{admin_topic_path(topic)}/partitions",
                partitions, timeout_s=30)
            assert status in (200, 204), body
        made.append((topic, partitions > 0))
        return topic

    yield maker
    for topic, partitioned in made:
        endpoint.delete_topic(topic, partitioned=partitioned)


@pytest.fixture
def open_destination(endpoint: PulsarEndpoint) -> Iterator[Callable[..., PulsarDestination]]:
    opened: list[PulsarDestination] = []

    def opener(topic: str, **kwargs: Any) -> PulsarDestination:
        destination = PulsarDestination("pulsar-lane", endpoint.service_url, topic, **kwargs)
        opened.append(destination)
        return destination

    yield opener
    for destination in opened:
        destination.close()


@pytest.fixture
def client(endpoint: PulsarEndpoint) -> Iterator[Any]:
    """A plain pulsar client for what the tests do behind the destination's back."""
    import pulsar

    made = pulsar.Client(endpoint.service_url, operation_timeout_seconds=10,
                         logger=pulsar.FileLogger(pulsar.LoggerLevel.Warn, "/dev/null"))
    yield made
    made.close()


def receive_all(consumer: Any, count: int, timeout_s: float = 10) -> list[Any]:
    import pulsar

    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        try:
            message = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            continue
        consumer.acknowledge(message)
        got.append(message)
    return got


def id_of(evidence: str) -> tuple[int, int, int]:
    match = EVIDENCE.match(evidence)
    assert match, evidence
    return int(match["ledger"]), int(match["entry"]), int(match["part"])


# publishing ------------------------------------------------------------------------------
def test_published_messages_carry_payload_key_and_properties(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
    client: Any,
) -> None:
    """Each request is one message with the payload, the key as partition key, the headers
    plus the delay-message and attempt ids; PUBLISHED evidence is its MessageId, and one key
    always lands on one partition."""
    import pulsar

    topic = make_topic(partitions=2)
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    destination = open_destination(topic)
    assert destination.probe() is None
    sent = [request("a1", key="k-1", payload=b"one", headers={"h": "x"}),
            request("a2", key="k-2", payload=b"two"),
            request("a3", key="k-1", payload=b"three", headers={PROPERTY_ATTEMPT_ID: "spoof"})]
    before = wall_ms()
    results = destination.publish(sent, wall_ms)
    assert outcomes(results) == [(Outcome.PUBLISHED, Disposition.NONE)] * 3
    assert all(r.published_at_ms is not None and r.published_at_ms >= before for r in results)
    by_attempt = {r.attempt_id: r.evidence for r in results}
    assert all((found := EVIDENCE.match(e)) is not None and found["topic"] == topic
               for e in by_attempt.values()), by_attempt

    got = {m.properties()[PROPERTY_ATTEMPT_ID]: m for m in receive_all(consumer, 3)}
    assert set(got) == {"a1", "a2", "a3"}
    for req in sent:
        message = got[req.attempt_id]
        assert message.data() == req.template.payload
        assert message.partition_key() == req.template.key
        assert message.properties() == {**req.template.headers,
                                        PROPERTY_DELAY_MESSAGE_ID: f"msg-{req.attempt_id}",
                                        PROPERTY_ATTEMPT_ID: req.attempt_id,
                                        PROPERTY_EVIDENCE_MAC: req.mac}
        message_id = message.message_id()
        assert id_of(by_attempt[req.attempt_id]) == (
            message_id.ledger_id(), message_id.entry_id(), message_id.partition())
    assert id_of(by_attempt["a1"])[2] == id_of(by_attempt["a3"])[2]  # same key, same partition


def test_deliver_at_handoff_is_held_by_pulsar_until_deliver_at(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
    client: Any,
) -> None:
    """With deliver-at handoff Pulsar stores the message at once (PUBLISHED) but a Shared
    subscription does not see it before deliverAt, and does see it after."""
    import pulsar

    topic = make_topic()
    consumer = client.subscribe(topic, "delayed", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    destination = open_destination(topic, deliver_at_handoff=True)
    deliver_at = wall_ms() + 2_000
    (result,) = destination.publish([request("late", deliver_at_ms=deliver_at)], wall_ms)
    assert result.outcome == Outcome.PUBLISHED
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=max(1, deliver_at - wall_ms() - 300))
    (message,) = receive_all(consumer, 1, timeout_s=10)
    seen_at = wall_ms()
    assert seen_at >= deliver_at
    assert message.properties()[PROPERTY_ATTEMPT_ID] == "late"


def test_without_handoff_deliver_at_is_not_sent(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
    client: Any,
) -> None:
    """Without the handoff flag the message is visible at once, whatever its deliverAt."""
    import pulsar

    topic = make_topic()
    consumer = client.subscribe(topic, "now", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    destination = open_destination(topic)
    destination.publish([request("now", deliver_at_ms=wall_ms() + 60_000)], wall_ms)
    # a deliverAt sent to the broker would hold the message back 60 s: well past this wait
    assert len(receive_all(consumer, 1, timeout_s=20)) == 1


def test_too_big_message_is_not_published_permanently(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
    client: Any,
) -> None:
    """A message over the broker's size limit is refused by the client before sending:
    NOT_PUBLISHED PERMANENT; its neighbours in the batch are published."""
    import pulsar

    topic = make_topic()
    destination = open_destination(topic)
    results = destination.publish(
        [request("small-1"), request("big", payload=b"x" * TOO_BIG), request("small-2")],
        wall_ms)
    assert outcomes(results) == [(Outcome.PUBLISHED, Disposition.NONE),
                                 (Outcome.NOT_PUBLISHED, Disposition.PERMANENT),
                                 (Outcome.PUBLISHED, Disposition.NONE)]
    assert "MessageTooBig refused before sending" in results[1].evidence
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    seen = []
    while reader.has_message_available():
        seen.append(reader.read_next(timeout_millis=2_000).properties()[PROPERTY_ATTEMPT_ID])
    assert seen == ["small-1", "small-2"]


def test_a_closed_producer_refuses_before_sending_and_is_reopened(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
) -> None:
    """A producer closed under the destination refuses inside send_async (AlreadyClosed,
    provably unsent): NOT_PUBLISHED LANE_UNAVAILABLE; the next publish opens a new one."""
    destination = open_destination(make_topic())
    assert destination.probe() is None
    destination._producer.close()  # behind its back
    (refused,) = destination.publish([request("r1")], wall_ms)
    assert (refused.outcome, refused.disposition) == (Outcome.NOT_PUBLISHED,
                                                      Disposition.LANE_UNAVAILABLE)
    assert "AlreadyClosed refused before sending" in refused.evidence
    (again,) = destination.publish([request("r2")], wall_ms)
    assert again.outcome == Outcome.PUBLISHED


# evidence --------------------------------------------------------------------------------
def test_scan_evidence_finds_a_published_attempt_and_not_an_absent_one(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
) -> None:
    """scan_evidence returns the same MessageId evidence publish gave, for attempts on the
    topic inside the time window, on any partition; absent ones are simply not returned."""
    topic = make_topic(partitions=2)
    destination = open_destination(topic)
    before = wall_ms()
    results = destination.publish([request("e1", key="a"), request("e2", key="b"),
                                   request("other", key="c")], wall_ms)
    evidence = {r.attempt_id: r.evidence for r in results}
    after = wall_ms()
    scanner = open_destination(topic)  # a fresh object, as after a restart
    assert scanner.scan_evidence(macs("e1", "e2", "absent"), before - 60_000,
                                 after + 1_000) == {"e1": evidence["e1"], "e2": evidence["e2"]}
    assert scanner.scan_evidence(macs("absent"), before - 60_000, after + 1_000) == {}
    assert scanner.scan_evidence(macs("e1"), after + 1_000, after + 60_000) == {}
    assert scanner.scan_evidence(macs("e1"), before - 60_000, before - 30_000) == {}
    assert scanner.scan_evidence({}, 0, after) == {}
    assert scanner.scan_evidence({"e1": "not-its-mac"}, before - 60_000, after + 1_000) == {}
    plain = make_topic()  # not partitioned: the evidence says partition -1 both ways
    (result,) = open_destination(plain).publish([request("p1")], wall_ms)
    assert id_of(result.evidence)[2] == -1
    assert open_destination(plain).scan_evidence(macs("p1"), before - 60_000,
                                                 wall_ms() + 1_000) == {"p1": result.evidence}


# an unreachable broker -------------------------------------------------------------------
def test_unreachable_broker_is_not_ready_and_nothing_is_sent() -> None:
    """No broker: probe gives a reason within the connect timeout, publish says
    NOT_PUBLISHED LANE_UNAVAILABLE (no producer, nothing sent), scan_evidence raises
    ServiceUnreachable."""
    url = f"pulsar://127.0.0.1:{closed_port()}"
    destination = PulsarDestination("lane", url, "nowhere", connect_timeout_s=2)
    try:
        started = time.monotonic()
        reason = destination.probe()
        assert reason is not None and "127.0.0.1" in reason
        assert time.monotonic() - started < 4.5
        started = time.monotonic()
        results = destination.publish([request("u1"), request("u2")], wall_ms)
        assert outcomes(results) == [(Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)] * 2
        assert all("nothing sent" in r.evidence for r in results)
        assert time.monotonic() - started < 4.5
        with pytest.raises(ServiceUnreachable):
            destination.scan_evidence(macs("u1"), 0, wall_ms())
    finally:
        destination.close()


def test_an_evidence_reference_fetches_the_message_it_names(
    make_topic: Callable[..., str], open_destination: Callable[..., PulsarDestination],
    endpoint: PulsarEndpoint,
) -> None:
    """`attempt resolve --evidence pulsar:TOPIC@LEDGER:ENTRY:PARTITION` reads exactly that
    message's attempt id and evidence MAC, on a partitioned topic and a plain one."""
    from nereus.adapters.backends.destination.evidence_fetch import fetch_evidence
    from nereus.config import parse_config

    lane = parse_config(f'[lanes.out]\ndestination = "pulsar"\n'
                        f'service_url = "{endpoint.service_url}"\n').lanes["out"]
    for topic in (make_topic(partitions=2), make_topic()):
        results = open_destination(topic).publish([request("v1", key="a"),
                                                   request("v2", key="b")], wall_ms)
        for result in results:
            fetched = fetch_evidence(result.evidence, lane)
            assert (fetched.attempt_id, fetched.mac) == (result.attempt_id,
                                                         f"mac-{result.attempt_id}")


# the destination contract ----------------------------------------------------------------
CONTRACT_SESSION = unique_topic("nereus-dest-contract")  # this session's topic prefix


class TestPulsarDestination(DestinationContract):
    """A two-partition topic per test (made through the admin API, deleted after) keeps
    every promise of the destination contract; the unreachable broker is a closed port."""

    @pytest.fixture(autouse=True)
    def _broker(self, pulsar_service: PulsarService) -> Iterator[None]:
        self.endpoint = pulsar_service.require()
        self.topics: set[str] = set()
        yield
        for topic in self.topics:
            self.endpoint.delete_topic(topic, partitioned=True)

    @staticmethod
    def topic_for(tmp_path: Path) -> str:
        """The test's topic: the same for the same ``tmp_path`` within this session."""
        digest = hashlib.blake2b(str(tmp_path).encode(), digest_size=6).hexdigest()
        return full_topic(f"{CONTRACT_SESSION}-{digest}")

    def make_destination(self, tmp_path: Path) -> PulsarDestination:
        topic = self.topic_for(tmp_path)
        if topic not in self.topics:
            status, body = admin_request(
                self.endpoint.admin_url, "PUT",
                f"admin/v2/{admin_topic_path(topic)}/partitions", 2, timeout_s=30)
            assert status in (200, 204), body
            self.topics.add(topic)
        return PulsarDestination("contract", self.endpoint.service_url, topic)

    def make_down(self, tmp_path: Path) -> Down:
        address = f"127.0.0.1:{closed_port()}"
        return Down(PulsarDestination("contract", f"pulsar://{address}",
                                      self.topic_for(tmp_path), connect_timeout_s=2),
                    address)

    def lane_settings(self, tmp_path: Path) -> LaneSettings:
        return LaneSettings(name="contract", destination="pulsar",
                            service_url=self.endpoint.service_url,
                            topic=self.topic_for(tmp_path))
