"""The contract every destination adapter passes (STYLE, habit 3): file, Kafka, Pulsar.

A backend's test module subclasses ``DestinationContract`` as ``Test<Backend>Destination``
and implements three hooks:

* ``make_destination(tmp_path)``: a destination on the target (file, topic) that belongs to
  ``tmp_path``. Calling it twice with the same ``tmp_path`` must give two independent
  objects on the SAME target (the scan tests read with a fresh one, as after a restart);
  the contract closes every object it gets, the backend does not.
* ``make_down(tmp_path)``: a destination whose target cannot be reached (an unwritable
  path, a closed local port), with the text (path, address) its reasons must name.
* ``lane_settings(tmp_path)``: the ``[lanes.NAME]`` an operator would write for that
  target, so ``fetch_evidence`` (``attempt resolve --evidence``) can read what a PUBLISHED
  result's evidence names.

Nothing here knows how a backend stores records: only the ``Destination`` protocol and the
evidence reference format are used. Every request carries a real evidence MAC
(``nereus.evidence_mac``) under a key of this module, so "it verifies" means what it means
in production: the record the evidence names carries the attempt id and a MAC that
``mac_matches`` accepts.
"""

from __future__ import annotations

import abc
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from nereus.adapters.backends.destination.evidence_fetch import fetch_evidence, is_reference
from nereus.adapters.backends.destination.protocol import (
    Destination,
    DestinationClosed,
    PublishRequest,
    PublishResult,
    record_size,
)
from nereus.config import LaneSettings
from nereus.errors import NereusError
from nereus.evidence_mac import evidence_mac, mac_matches
from nereus.publish import PublishTemplate
from nereus.records import Disposition, Outcome

ROUTE_KEY = secrets.token_bytes(32)  # the route's evidence key, for this test session
OTHER_KEY = secrets.token_bytes(32)  # someone else's: records under it are not evidence
GENERATION = 1
# a probe runs on the publisher's path to readiness: an unreachable target must be
# reported within this, however the backend finds out
PROBE_DEADLINE_S = 10.0
SCAN_SLACK_MS = 60_000  # the scan window reaches this far either side of the publishes
UNLIMITED_PROBE_BYTES = 2_000_000  # a record this large is fine where there is no limit


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def request(attempt_id: str, *, key: str | None = None, payload: bytes = b"payload",
            headers: dict[str, str] | None = None, mac_key: bytes = ROUTE_KEY,
            lane: str = "contract") -> PublishRequest:
    """A request as the publisher hands it over: template plus the attempt's evidence MAC."""
    delay_message_id = f"dm-{attempt_id}"
    now = wall_ms()
    template = PublishTemplate(
        delay_message_id=delay_message_id, generation=GENERATION, lane=lane,
        deliver_at_ms=now, action_at_ms=now, key=key, headers=headers or {},
        payload=payload)
    return PublishRequest(attempt_id, template,
                          mac=evidence_mac(mac_key, delay_message_id, GENERATION, attempt_id))


def wanted(*requests: PublishRequest) -> dict[str, str]:
    """What the evidence worker asks ``scan_evidence`` for: attempt id -> expected MAC."""
    return {r.attempt_id: r.mac for r in requests}


def names_record(found: str, published: str) -> bool:
    """Whether scan evidence ``found`` names the record publish reported as ``published``:
    the same reference, perhaps followed by a note in parentheses."""
    return found == published or found.startswith(published + " (")


@dataclass(frozen=True, slots=True)
class Down:
    """A destination that cannot reach its target, and the target as reasons name it."""

    destination: Destination
    target: str


class DestinationContract(abc.ABC):
    """Promises of the Destination protocol, checked against one backend."""

    @abc.abstractmethod
    def make_destination(self, tmp_path: Path) -> Destination:
        """A destination on the target belonging to ``tmp_path`` (same path: same target)."""

    @abc.abstractmethod
    def make_down(self, tmp_path: Path) -> Down:
        """A destination whose target cannot be reached at all."""

    @abc.abstractmethod
    def lane_settings(self, tmp_path: Path) -> LaneSettings:
        """The lane an operator would configure for ``make_destination``'s target."""

    @pytest.fixture
    def open_destination(self, tmp_path: Path) -> Iterator[Callable[[], Destination]]:
        """Opens destinations on this test's target and closes them all at teardown."""
        opened: list[Destination] = []

        def opener() -> Destination:
            destination = self.make_destination(tmp_path)
            opened.append(destination)
            return destination

        yield opener
        for destination in opened:
            destination.close()

    @pytest.fixture
    def destination(self, open_destination: Callable[[], Destination]) -> Destination:
        return open_destination()

    @pytest.fixture
    def down(self, tmp_path: Path) -> Iterator[Down]:
        """An unreachable destination, closed at teardown."""
        made = self.make_down(tmp_path)
        yield made
        made.destination.close()

    def publish_all(self, destination: Destination,
                    requests: Sequence[PublishRequest]) -> list[PublishResult]:
        """Publish and insist every request was PUBLISHED (the target is up)."""
        results = destination.publish(requests, wall_ms)
        assert [r.outcome for r in results] == [Outcome.PUBLISHED] * len(requests), results
        return results

    # identity ---------------------------------------------------------------------------
    def test_names_itself_and_its_record_limit(self, destination: Destination) -> None:
        """A destination has its lane's name and a record limit that is None or positive
        (the planner checks it at Claim, before any attempt is admitted)."""
        assert isinstance(destination.name, str) and destination.name
        limit = destination.max_record_bytes
        assert limit is None or (isinstance(limit, int) and limit > 0)

    # publish ----------------------------------------------------------------------------
    def test_an_empty_batch_has_no_results(self, destination: Destination) -> None:
        """Publishing nothing answers [] (and sends nothing)."""
        assert destination.publish([], wall_ms) == []

    def test_one_result_per_request_with_matching_attempt_ids(
        self, destination: Destination
    ) -> None:
        """A batch of several requests (keys or none, headers, binary and empty payloads)
        gets exactly one result per request, each carrying its request's attempt id."""
        requests = [
            request("one", key="k-1", payload=b"first", headers={"trace": "t-1"}),
            request("two", key=None, payload=bytes(range(256))),
            request("three", key="k-1", payload=b""),
            request("four", key="k-2", headers={"a": "1", "b": "2"}),
            request("five", key="k-3", payload=b"x" * 10_000),
        ]
        results = destination.publish(requests, wall_ms)
        assert len(results) == len(requests)
        assert Counter(r.attempt_id for r in results) == Counter(
            r.attempt_id for r in requests)
        assert all(isinstance(r, PublishResult) for r in results)

    def test_published_results_carry_evidence_that_names_a_verifiable_record(
        self, destination: Destination, tmp_path: Path
    ) -> None:
        """Each PUBLISHED result has disposition NONE, a publish time, and evidence that is
        a destination reference; the record it names carries the attempt id and an evidence
        MAC that verifies under the route's key."""
        requests = [request(f"ev-{n}", key=f"k-{n}", payload=f"body-{n}".encode())
                    for n in range(4)]
        before = wall_ms()
        results = self.publish_all(destination, requests)
        after = wall_ms()
        lane = self.lane_settings(tmp_path)
        by_attempt = {r.attempt_id: r for r in results}
        for req in requests:
            result = by_attempt[req.attempt_id]
            assert result.disposition == Disposition.NONE and not result.message_fault
            assert result.published_at_ms is not None
            assert before - 1_000 <= result.published_at_ms <= after + 1_000, result
            assert is_reference(result.evidence), result.evidence
            fetched = fetch_evidence(result.evidence, lane)
            assert fetched.attempt_id == req.attempt_id, (result.evidence, fetched)
            assert mac_matches(ROUTE_KEY, req.template.delay_message_id, GENERATION,
                               req.attempt_id, fetched.mac), (result.evidence, fetched)
            assert not mac_matches(OTHER_KEY, req.template.delay_message_id, GENERATION,
                                   req.attempt_id, fetched.mac)

    def test_evidence_names_one_record_only(
        self, open_destination: Callable[[], Destination]
    ) -> None:
        """No two published records share evidence: not within a batch, not across
        batches, not across two destination objects on one target."""
        first = self.publish_all(open_destination(), [request("u-1", key="a"),
                                                      request("u-2", key="b")])
        again = self.publish_all(open_destination(), [request("u-3", key="a")])
        more = self.publish_all(open_destination(), [request("u-4", key="c")])
        evidence = [r.evidence for r in first + again + more]
        assert len(set(evidence)) == len(evidence), evidence

    def test_a_record_over_the_limit_fails_alone_as_the_messages_own_fault(
        self, destination: Destination
    ) -> None:
        """A record heavier than ``max_record_bytes`` is NOT_PUBLISHED PERMANENT with
        ``message_fault`` (its lane stays READY: probe still passes) and its batch-mates are
        PUBLISHED; with no limit, a large record is published like any other."""
        limit = destination.max_record_bytes
        big = request("big", payload=b"B" * (limit or UNLIMITED_PROBE_BYTES))
        assert record_size(big.template) > (limit or 0)
        results = destination.publish([request("small-1"), big, request("small-2")], wall_ms)
        by_attempt = {r.attempt_id: r for r in results}
        assert len(results) == 3 and set(by_attempt) == {"small-1", "big", "small-2"}
        assert by_attempt["small-1"].outcome == by_attempt["small-2"].outcome == (
            Outcome.PUBLISHED), results
        refused = by_attempt["big"]
        if limit is None:
            assert refused.outcome == Outcome.PUBLISHED, refused
        else:
            assert (refused.outcome, refused.disposition, refused.message_fault) == (
                Outcome.NOT_PUBLISHED, Disposition.PERMANENT, True), refused
            assert destination.probe() is None

    # probe ------------------------------------------------------------------------------
    def test_probe_passes_when_the_target_is_up(self, destination: Destination) -> None:
        """probe answers None when the destination can take work, and publish then works."""
        assert destination.probe() is None
        self.publish_all(destination, [request("after-probe")])

    def test_probe_says_why_when_the_target_is_down(self, down: Down) -> None:
        """An unreachable target: probe returns a reason naming it (path or address),
        within a bounded time, and keeps saying so when asked again."""
        for _ in range(2):
            started = time.monotonic()
            reason = down.destination.probe()
            assert time.monotonic() - started < PROBE_DEADLINE_S
            assert isinstance(reason, str) and reason.strip(), reason
            assert down.target in reason, reason

    def test_publish_to_a_down_target_sends_nothing_and_says_why(self, down: Down) -> None:
        """An unreachable target: each request is NOT_PUBLISHED (nothing left), the lane's
        fault (RETRIABLE or LANE_UNAVAILABLE, never message_fault), with evidence naming
        the target."""
        requests = [request("d-1"), request("d-2"), request("d-3")]
        results = down.destination.publish(requests, wall_ms)
        assert [r.attempt_id for r in results] == ["d-1", "d-2", "d-3"]
        for result in results:
            assert result.outcome == Outcome.NOT_PUBLISHED, result
            assert result.disposition in (Disposition.RETRIABLE,
                                          Disposition.LANE_UNAVAILABLE), result
            assert not result.message_fault, result
            assert down.target in result.evidence, result
            assert result.published_at_ms is None

    def test_scan_evidence_on_a_down_target_claims_nothing(self, down: Down) -> None:
        """An unreachable target: scan_evidence raises a NereusError naming it (a partial
        scan is no answer) or answers {} (nothing there to find); never evidence."""
        started = time.monotonic()
        try:
            found = down.destination.scan_evidence(wanted(request("x-1")), 0, wall_ms())
        except NereusError as exc:
            assert down.target in exc.message, exc.message
        else:
            assert found == {}
        assert time.monotonic() - started < PROBE_DEADLINE_S

    # scan_evidence ----------------------------------------------------------------------
    def test_scan_evidence_finds_a_published_attempt_and_not_an_absent_one(
        self, open_destination: Callable[[], Destination]
    ) -> None:
        """A fresh destination on the target (as after a restart) finds published attempts
        by attempt id and MAC, naming the record publish reported; an attempt never
        published is simply not in the answer."""
        published = [request("s-1", key="a"), request("s-2", key="b"),
                     request("s-other", key="c")]
        before = wall_ms()
        results = self.publish_all(open_destination(), published)
        after = wall_ms()
        evidence = {r.attempt_id: r.evidence for r in results}
        never = request("s-never")
        found = open_destination().scan_evidence(
            wanted(published[0], published[1], never), before - SCAN_SLACK_MS,
            after + SCAN_SLACK_MS)
        assert set(found) == {"s-1", "s-2"}, found
        for attempt_id, text in found.items():
            assert names_record(text, evidence[attempt_id]), (text, evidence[attempt_id])

    def test_scan_evidence_ignores_a_record_without_the_attempts_mac(
        self, open_destination: Callable[[], Destination]
    ) -> None:
        """A record with the wanted attempt id but a MAC under another key is not evidence;
        the genuine record of the same attempt, once it lands, is."""
        forged = request("m-1", mac_key=OTHER_KEY)
        genuine = request("m-1")
        before = wall_ms()
        self.publish_all(open_destination(), [forged])
        scanner = open_destination()
        window = (before - SCAN_SLACK_MS, wall_ms() + SCAN_SLACK_MS)
        assert scanner.scan_evidence(wanted(genuine), *window) == {}
        (result,) = self.publish_all(open_destination(), [genuine])
        found = scanner.scan_evidence(wanted(genuine), before - SCAN_SLACK_MS,
                                      wall_ms() + SCAN_SLACK_MS)
        assert set(found) == {"m-1"} and names_record(found["m-1"], result.evidence), found

    def test_scan_evidence_for_nothing_finds_nothing(self, destination: Destination) -> None:
        """Asking for no attempts answers {} (on an empty target and after publishing)."""
        assert destination.scan_evidence({}, 0, wall_ms()) == {}
        self.publish_all(destination, [request("n-1")])
        assert destination.scan_evidence({}, 0, wall_ms() + SCAN_SLACK_MS) == {}

    # close ------------------------------------------------------------------------------
    def test_close_is_idempotent(self, open_destination: Callable[[], Destination]) -> None:
        """close may be called twice, on a destination that published and on one that
        never did."""
        used = open_destination()
        self.publish_all(used, [request("c-1")])
        used.close()
        used.close()
        idle = open_destination()
        idle.close()
        idle.close()

    def test_a_closed_destination_refuses_work(
        self, open_destination: Callable[[], Destination]
    ) -> None:
        """After close: publish answers every request NOT_PUBLISHED LANE_UNAVAILABLE saying
        it is closed (and nothing lands), probe says it is closed, and scan_evidence raises
        DestinationClosed."""
        closed = open_destination()
        self.publish_all(closed, [request("r-0")])
        before = wall_ms()
        closed.close()
        late = [request("r-1"), request("r-2")]
        results = closed.publish(late, wall_ms)
        assert [r.attempt_id for r in results] == ["r-1", "r-2"]
        for result in results:
            assert (result.outcome, result.disposition) == (
                Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE), result
            assert "closed" in result.evidence and not result.message_fault, result
        reason = closed.probe()
        assert reason is not None and "closed" in reason, reason
        with pytest.raises(DestinationClosed, match="closed"):
            closed.scan_evidence(wanted(*late), before - SCAN_SLACK_MS,
                                 wall_ms() + SCAN_SLACK_MS)
        assert open_destination().scan_evidence(
            wanted(*late), before - SCAN_SLACK_MS, wall_ms() + SCAN_SLACK_MS) == {}
