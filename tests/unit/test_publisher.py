"""The lane publisher survives its failures: a failed publish, a crash mid-reply."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.engine.publishing.lane_publisher import LanePublisher
from nereus.engine.runtime.event_log import RecordingEventLog
from nereus.engine.runtime.supervisor import Backoff, Supervisor
from nereus.evidence_mac import ExpectedMac
from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome
from tests.fake_clock import FakeClock
from tests.polling import wait_until


def request(n: int) -> PublishRequest:
    template = PublishTemplate(delay_message_id=f"m{n}", generation=1, lane="lane",
                               deliver_at_ms=0, action_at_ms=0, key=None, headers={},
                               payload=b"x")
    return PublishRequest(f"a{n}", template)


class Scripted:
    """A destination that fails while ``broken`` is set, else publishes."""

    name = "scripted"
    max_record_bytes: int | None = None

    def __init__(self) -> None:
        self.broken = False
        self.sent: list[str] = []

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        if self.broken:
            return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                                  "cannot open the target") for r in requests]
        self.sent.extend(r.attempt_id for r in requests)
        return [PublishResult(r.attempt_id, Outcome.PUBLISHED, Disposition.NONE, "here")
                for r in requests]

    def probe(self) -> str | None:
        return "still broken" if self.broken else None

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass


class Replies:
    def __init__(self) -> None:
        self.results: dict[str, list[PublishResult]] = {}
        self.lock = threading.Lock()

    def __call__(self, result: PublishResult, /) -> None:
        with self.lock:
            self.results.setdefault(result.attempt_id, []).append(result)


def keyword_only_log() -> RecordingEventLog:
    """The daemon's logger takes the event name and keyword fields only, like this one."""
    return RecordingEventLog()


def test_a_lane_survives_its_first_failed_publish() -> None:
    """A failed publish makes the lane NOT READY and logs it; once the probe passes the lane
    is READY again and publishes. (Before the event log was typed, the publisher passed a
    dict positionally to the daemon's keyword logger and died on this very event.)"""
    events = keyword_only_log()
    destination = Scripted()
    publisher = LanePublisher("lane", destination, probe_interval_s=0.02,
                              events=events)
    supervisor = Supervisor(events, Backoff(initial_s=0.01))
    publisher.start(supervisor)
    replies = Replies()
    destination.broken = True
    publisher.submit(request(1), replies)
    wait_until("the failed publish's reply", lambda: "a1" in replies.results, 5)
    assert not publisher.ready
    assert events.named("lane_not_ready")[0]["lane"] == "lane"
    destination.broken = False
    wait_until("the lane READY again", lambda: publisher.ready, 5)
    publisher.submit(request(2), replies)
    wait_until("the next publish", lambda: "a2" in replies.results, 5)
    assert replies.results["a2"][0].outcome == Outcome.PUBLISHED
    assert supervisor.restarts == 0, events.named("worker_crashed")
    assert publisher.stop(5) == []


def test_results_already_held_are_delivered_after_a_crash() -> None:
    """A reply that raises crashes the publisher mid-delivery; after the restart every result
    is delivered exactly once and nothing is sent twice."""
    events = RecordingEventLog()
    destination = Scripted()
    publisher = LanePublisher("lane", destination, events=events)
    replies = Replies()
    failed_once = threading.Event()

    def fragile(result: PublishResult, /) -> None:
        if result.attempt_id == "a2" and not failed_once.is_set():
            failed_once.set()
            raise RuntimeError("reply failed")
        replies(result)

    for n in range(1, 4):
        publisher.submit(request(n), fragile)
    supervisor = Supervisor(events, Backoff(initial_s=0.01))
    publisher.start(supervisor)
    wait_until("three replies", lambda: len(replies.results) == 3, 5)
    assert {k: len(v) for k, v in replies.results.items()} == {"a1": 1, "a2": 1, "a3": 1}
    assert sorted(destination.sent) == ["a1", "a2", "a3"]
    assert supervisor.restarts == 1
    assert events.named("worker_crashed")[0]["error"] == "RuntimeError: reply failed"
    publisher.stop(5)


def test_a_messages_own_fault_leaves_its_lane_ready() -> None:
    """A PERMANENT failure that is the message's own (too large, invalid) fails that message
    only: the lane stays READY and the next message is published."""

    class Picky(Scripted):
        def publish(self, requests: Sequence[PublishRequest],
                    now_ms: Callable[[], int]) -> list[PublishResult]:
            results = []
            for r in requests:
                if r.template.delay_message_id == "m1":
                    results.append(PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED,
                                                 Disposition.PERMANENT, "MSG_SIZE_TOO_LARGE",
                                                 message_fault=True))
                else:
                    self.sent.append(r.attempt_id)
                    results.append(PublishResult(r.attempt_id, Outcome.PUBLISHED,
                                                 Disposition.NONE, "here"))
            return results

    publisher = LanePublisher("lane", Picky())
    publisher.start()
    replies = Replies()
    publisher.submit(request(1), replies)
    wait_until("the refused message's reply", lambda: "a1" in replies.results, 5)
    assert publisher.ready, publisher.not_ready_reason
    publisher.submit(request(2), replies)
    wait_until("the next message", lambda: "a2" in replies.results, 5)
    assert replies.results["a2"][0].outcome == Outcome.PUBLISHED
    publisher.stop(5)


class Counted(Scripted):
    """Scripted, counting its probes and noting the publish time of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.probes = 0
        self.seen_ms: list[int] = []

    def probe(self) -> str | None:
        self.probes += 1
        return super().probe()

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        self.seen_ms.append(now_ms())
        return super().publish(requests, now_ms)


@pytest.mark.timeout(30)
def test_a_not_ready_lane_is_probed_again_when_its_clock_says_so() -> None:
    """The probe interval is an hour on a FakeClock: after a failed publish the lane stays
    NOT READY, with no new probe, while the clock reads 3599 s later (the publisher has
    looked at it since); one probe right after advancing the last second makes it READY,
    within real seconds. The publish time the destination sees is the clock's."""
    clock = FakeClock(wall_ms=1_234_000)
    destination = Counted()
    publisher = LanePublisher("lane", destination, clock=clock, probe_interval_s=3600)
    publisher.start()
    wait_until("the first probe", lambda: publisher.ready, 5)
    replies = Replies()
    destination.broken = True
    publisher.submit(request(1), replies)
    wait_until("the failed publish's reply", lambda: "a1" in replies.results, 5)
    assert not publisher.ready and destination.seen_ms == [1_234_000]
    destination.broken = False
    clock.advance(3599)
    looked = clock.reads
    wait_until("the publisher's next look", lambda: clock.reads >= looked + 2, 5)
    assert not publisher.ready and destination.probes == 1  # the publisher's first
    clock.advance(1)
    wait_until("the probe an hour later", lambda: publisher.ready, 5)
    assert destination.probes == 2
    publisher.stop(5)


class Gate:
    """A shard loop's owner gate: counts how often it is asked; ``why`` is its answer."""

    def __init__(self, why: str | None) -> None:
        self.why = why
        self.asked = 0

    def __call__(self) -> str | None:
        self.asked += 1
        return self.why


def test_each_owner_gate_is_asked_once_per_batch() -> None:
    """Jobs taken as one batch from two shard loops: each loop's gate is asked once, just
    before the destination call, not once per job; the open gate's jobs are sent, the
    closed gate's are declined (NOT_PUBLISHED LANE_UNAVAILABLE) and never sent."""
    destination = Scripted()
    publisher = LanePublisher("lane", destination)
    replies = Replies()
    live, fenced = Gate(None), Gate("fenced by owner b")
    for n in range(1, 7):
        publisher.submit(request(n), replies, live.__call__ if n % 2 else fenced.__call__)
    publisher.start()
    wait_until("six replies", lambda: len(replies.results) == 6, 5)
    assert (live.asked, fenced.asked) == (1, 1)
    assert sorted(destination.sent) == ["a1", "a3", "a5"]
    declined = [replies.results[f"a{n}"][0] for n in (2, 4, 6)]
    assert {(r.outcome, r.disposition) for r in declined} == {
        (Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)}
    assert "fenced by owner b" in declined[0].evidence
    publisher.stop(5)


class Hanging(Scripted):
    """Scripted, but a publish (or a probe, with ``hang_probe``) blocks until ``release``
    is set; ``entered`` counts the calls that began."""

    def __init__(self, *, hang_probe: bool = False) -> None:
        super().__init__()
        self.hang_probe = hang_probe
        self.release = threading.Event()
        self.entered = 0

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        self.entered += 1
        self.release.wait(30)
        return super().publish(requests, now_ms)

    def probe(self) -> str | None:
        if self.hang_probe:
            self.entered += 1
            self.release.wait(30)
        return super().probe()


@pytest.mark.timeout(60)
def test_a_publish_that_overruns_its_deadline_is_unknown_and_its_lane_not_ready() -> None:
    """A publish call still running 30 s (FakeClock) after it began: its job is answered
    UNKNOWN (the call began), the jobs queued behind it are declined (never sent), the lane
    is NOT READY naming the hung call, logged once. When the call returns its PUBLISHED is
    forwarded as late evidence, and the next probe makes the lane READY again."""
    clock = FakeClock()
    events = RecordingEventLog()
    destination = Hanging()
    publisher = LanePublisher("lane", destination, clock=clock, events=events,
                              probe_interval_s=1, publish_timeout_s=30)
    publisher.start()
    wait_until("the first probe", lambda: publisher.ready, 5)
    replies = Replies()
    publisher.submit(request(1), replies)
    wait_until("the publish call to begin", lambda: destination.entered == 1, 5)
    publisher.submit(request(2), replies)
    publisher.submit(request(3), replies)
    clock.advance(30)
    wait_until("every job answered", lambda: len(replies.results) == 3, 5)
    first = replies.results["a1"][0]
    assert (first.outcome, first.disposition) == (Outcome.UNKNOWN, Disposition.NONE)
    assert "has not returned within 30 s" in first.evidence
    for n in (2, 3):
        declined = replies.results[f"a{n}"][0]
        assert (declined.outcome, declined.disposition) == (
            Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)
        assert "never handed to the destination" in declined.evidence
    assert not publisher.ready
    assert "has not answered a publish begun at" in (publisher.not_ready_reason or "")
    assert [e["reason"] for e in events.named("lane_not_ready")] == [
        publisher.not_ready_reason]
    assert destination.entered == 1 and destination.sent == []
    destination.release.set()
    wait_until("the late answer", lambda: len(replies.results["a1"]) == 2, 5)
    late = replies.results["a1"][1]
    assert late.outcome == Outcome.PUBLISHED and "after its deadline" in late.evidence
    clock.advance(1)
    wait_until("the lane READY after a probe", lambda: publisher.ready, 5)
    publisher.submit(request(4), replies)
    wait_until("the next publish", lambda: "a4" in replies.results, 5)
    assert replies.results["a4"][0].outcome == Outcome.PUBLISHED
    publisher.stop(5)


@pytest.mark.timeout(60)
def test_a_destination_that_hangs_when_opened_holds_up_nothing_but_its_lane() -> None:
    """The first probe blocks (a FIFO with no reader would): building the publisher and
    starting it return at once, the lane is NOT READY waiting for that probe, then, past
    the probe deadline, NOT READY naming the probe that hangs (logged once); a job handed
    over meanwhile is declined at once, never sent. Once the probe answers, the lane is
    READY."""
    clock = FakeClock()
    events = RecordingEventLog()
    destination = Hanging(hang_probe=True)
    publisher = LanePublisher("lane", destination, clock=clock, events=events,
                              probe_interval_s=1, probe_timeout_s=10)
    assert destination.entered == 0 and not publisher.ready
    publisher.start()
    wait_until("the first probe to begin", lambda: destination.entered == 1, 5)
    assert publisher.not_ready_reason == "the destination has not answered its first probe yet"
    clock.advance(10)
    wait_until("the probe's deadline",
               lambda: "probe begun at" in (publisher.not_ready_reason or ""), 5)
    assert len(events.named("lane_not_ready")) == 1
    replies = Replies()
    publisher.submit(request(1), replies)
    wait_until("the job's answer", lambda: "a1" in replies.results, 5)
    declined = replies.results["a1"][0]
    assert (declined.outcome, declined.disposition) == (
        Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE)
    assert destination.sent == [] and destination.entered == 1
    destination.hang_probe = False
    destination.release.set()
    clock.advance(1)
    wait_until("the lane READY once the probe answers", lambda: publisher.ready, 5)
    assert len(events.named("lane_not_ready")) == 1
    publisher.stop(5)
