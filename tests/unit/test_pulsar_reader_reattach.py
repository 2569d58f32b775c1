"""A Pulsar reader asked whether more is there while the broker re-attaches it after a seek
(``nereus.adapters.backends.pulsar.pulsar_destination.has_message_available``): the evidence
scan asks again instead of calling the broker unreachable. The client's refusal is
pulsar-client's own ``BrokerMetadataError``; the reader and client around it are stand-ins,
since the real race is rare (one CI run in several; none in 1,000 scans against the test
broker here)."""

from __future__ import annotations

import itertools

import pulsar
import pytest

from nereus.adapters.backends.pulsar import pulsar_destination as destination_module
from nereus.adapters.backends.pulsar.pulsar_evidence import (
    PROPERTY_ATTEMPT_ID,
    PROPERTY_EVIDENCE_MAC,
    has_message_available,
)
from tests.fake_clock import FakeClock


class Reader:
    """Refuses ``refusals`` questions with ``error``, then answers ``answer``; notes the
    clock's time of each question."""

    def __init__(self, clock: FakeClock, refusals: int, answer: bool = True,
                 error: type[Exception] = pulsar.BrokerMetadataError) -> None:
        self.clock = clock
        self.refusals = refusals
        self.answer = answer
        self.error = error
        self.asked_at: list[float] = []

    def has_message_available(self) -> bool:
        self.asked_at.append(self.clock.monotonic())
        if len(self.asked_at) <= self.refusals:
            raise self.error(f"Pulsar error: {self.error.__name__}")
        return self.answer

    def pauses(self) -> list[float]:
        """The time between one question and the next, in seconds (rounded to 1 ms)."""
        return [round(b - a, 3) for a, b in itertools.pairwise(self.asked_at)]


@pytest.fixture
def clock() -> FakeClock:
    """A clock that jumps to a sleeper's deadline at once: the pauses take no real time."""
    return FakeClock(autojump_threshold_s=0)


def test_a_reader_not_yet_re_attached_is_asked_again_after_growing_pauses(
        clock: FakeClock) -> None:
    """Refused seven times (the broker has closed the consumer, the client has not yet
    re-subscribed it), the question is asked an eighth time and its answer returned; the
    pauses double from 50 ms up to 1 s."""
    reader = Reader(clock, refusals=7, answer=False)
    assert has_message_available(reader, clock.monotonic() + 60, clock=clock) is False
    assert reader.pauses() == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_an_answer_at_once_takes_no_pause(clock: FakeClock) -> None:
    """A reader that answers is asked once."""
    reader = Reader(clock, refusals=0)
    assert has_message_available(reader, clock.monotonic() + 60, clock=clock) is True
    assert len(reader.asked_at) == 1


def test_a_reader_still_refused_at_the_deadline_raises_the_clients_error(
        clock: FakeClock) -> None:
    """A refusal that would outlast the scan's deadline is raised as it came (the scan
    then reports the broker unreachable): the question is not asked for ever, nor after
    the deadline."""
    reader = Reader(clock, refusals=1_000)
    deadline = clock.monotonic() + 2.0
    with pytest.raises(pulsar.BrokerMetadataError):
        has_message_available(reader, deadline, clock=clock)
    assert reader.pauses() == [0.05, 0.1, 0.2, 0.4, 0.8]
    assert reader.asked_at[-1] <= deadline


@pytest.mark.parametrize("error", [pulsar.Timeout, pulsar.ConnectError, pulsar.AlreadyClosed])
def test_other_errors_are_raised_at_once(clock: FakeClock, error: type[Exception]) -> None:
    """Only the re-attach refusal is asked again: a timeout, a lost connection or a closed
    reader is raised on the first question."""
    reader = Reader(clock, refusals=1, error=error)
    with pytest.raises(error):
        has_message_available(reader, clock.monotonic() + 60, clock=clock)
    assert len(reader.asked_at) == 1


# the evidence scan, on a stand-in client whose reader the broker re-attaches late ----------
class Message:
    """A message on the stand-in topic: an attempt's properties, a publish time, an id."""

    def __init__(self, attempt_id: str, mac: str, publish_ms: int, entry: int) -> None:
        self._properties = {PROPERTY_ATTEMPT_ID: attempt_id, PROPERTY_EVIDENCE_MAC: mac}
        self._publish_ms = publish_ms
        self._entry = entry

    def properties(self) -> dict[str, str]:
        return self._properties

    def publish_timestamp(self) -> int:
        return self._publish_ms

    def message_id(self) -> MessageId:
        return MessageId(self._entry)


class MessageId:
    def __init__(self, entry: int) -> None:
        self._entry = entry

    def ledger_id(self) -> int:
        return 7

    def entry_id(self) -> int:
        return self._entry

    def partition(self) -> int:
        return 0


class SeekingReader:
    """A reader over ``messages`` whose first question after ``seek`` is refused, as when
    the broker has closed its consumer for the seek and the client has not re-subscribed."""

    def __init__(self, messages: list[Message]) -> None:
        self._messages = messages
        self._next = 0
        self._refuse_next = False
        self.refusals = 0

    def seek(self, publish_ms: int) -> None:
        self._next = next((n for n, m in enumerate(self._messages)
                           if m.publish_timestamp() >= publish_ms), len(self._messages))
        self._refuse_next = True

    def has_message_available(self) -> bool:
        if self._refuse_next:
            self._refuse_next = False
            self.refusals += 1
            raise pulsar.BrokerMetadataError("Pulsar error: BrokerMetadataError")
        return self._next < len(self._messages)

    def read_next(self, timeout_millis: int) -> Message:
        message = self._messages[self._next]
        self._next += 1
        return message

    def close(self) -> None:
        pass


class Client:
    """A one-partition topic's client, handing out ``reader``."""

    def __init__(self, reader: SeekingReader) -> None:
        self.reader = reader

    def get_topic_partitions(self, topic: str) -> list[str]:
        return [f"{topic}-partition-0"]

    def create_reader(self, topic: str, start: object) -> SeekingReader:
        return self.reader

    def close(self) -> None:
        pass


def test_an_evidence_scan_whose_reader_is_re_attached_late_still_finds_the_attempt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan seeks by publish time, is refused once while the reader is re-attached,
    asks again and finds the published attempt (before, it reported the broker
    unreachable and the attempt stayed UNCERTAIN until the next scan)."""
    reader = SeekingReader([Message("a-old", "mac-old", 1_000, 0),
                            Message("a-1", "mac-1", 5_000, 1),
                            Message("a-2", "mac-2", 6_000, 2)])
    monkeypatch.setattr(destination_module, "make_client",
                        lambda *args, **kwargs: Client(reader))
    destination = destination_module.PulsarDestination("lane", "pulsar://127.0.0.1:1",
                                                       "orders")
    try:
        found = destination.scan_evidence({"a-1": "mac-1", "never": "mac-x"}, 4_000, 9_000)
    finally:
        destination.close()
    assert found == {"a-1": "pulsar:persistent://public/default/orders@7:1:0"}
    assert reader.refusals == 1
