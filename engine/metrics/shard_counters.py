"""What a shard loop counts as it applies records, for the Prometheus exposition.

The loop calls ``observe`` only for PUBLISH_ADMISSION and PUBLISH_OUTCOME records (a set
lookup on the type), so a SCHEDULE costs nothing here. Counts are plain ints and bucket
lists written by the loop's one thread and read by a scrape without a lock: a value may be
a record behind another, never torn (a bucket list is copied before it is summed, so
``_count`` equals the ``+Inf`` bucket). Claims are counted apart from admissions, from the
``ClaimBook``'s ``ClaimWatch``. Labels are bounded: lane, reason, outcome; never a message
or attempt id. No Prometheus import: ``collect`` builds the metric families.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Final, Protocol

from nereus.engine.scheduler.claims import Revocation
from nereus.machine import Applied, Reason
from nereus.records import PublishAdmission, PublishOutcome, ResultStatus

# seconds; due lag is how late an admission was decided after its actionAt
DUE_LAG_BUCKETS_S: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                            30.0, 60.0, 300.0)
# seconds from an admission applied to its outcome applied (the publish round trip)
OUTCOME_LATENCY_BUCKETS_S: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                    1.0, 2.5, 5.0, 10.0, 30.0)
# seconds a Claim's local preparation took (revalidation, permits, payload, template)
CLAIM_LATENCY_BUCKETS_S: Final = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                  0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
CLAIM_REVOCATION_REASONS: Final = tuple(reason.value for reason in Revocation)
# admissions remembered for their outcome's latency; past this (outcomes that never came
# to this owner: fenced, moved) the oldest half is forgotten
MAX_REMEMBERED: Final = 100_000

OBSERVED: Final = frozenset({PublishAdmission, PublishOutcome})
# the reasons an admission can lose for (nereus/machine/publishing.py): each is exposed from
# zero, so a rate over it exists before the first one happens
ADMISSION_STALE_REASONS: Final = tuple(reason.value for reason in (
    Reason.STALE_MESSAGE_STATE, Reason.STALE_GENERATION, Reason.STALE_WORK,
    Reason.ATTEMPT_OPEN, Reason.LANE_CLOSED, Reason.LANE_AT_CAPACITY, Reason.QUOTA_EXCEEDED,
    Reason.SHARD_PAUSED, Reason.NOT_DUE, Reason.EXPIRED, Reason.TIME_EVIDENCE, Reason.FENCED,
    Reason.NOT_ORDERED_HEAD))


class Buckets:
    """One histogram's buckets (``bounds`` inclusive upper bounds, then +Inf) and sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> tuple[list[tuple[str, int]], float]:
        """([(le, cumulative count)...] ending with +Inf, sum), from one copy of the counts."""
        counts, total = list(self.counts), self.total
        out: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*map(_le, self.bounds), "+Inf"), counts, strict=True):
            running += count
            out.append((bound, running))
        return out, total


def _le(bound: float) -> str:
    return repr(float(bound))


class ClaimLookup(Protocol):
    """The loop's claim book, as far as metrics read it (the claimed work's lane, actionAt)."""

    def for_attempt(self, attempt_id: str) -> _Claim | None: ...


class _Template(Protocol):
    @property
    def action_at_ms(self) -> int: ...


class _Claim(Protocol):
    @property
    def lane(self) -> str: ...

    @property
    def template(self) -> _Template: ...


class ShardMetrics:
    """One shard loop's counters and histograms (module docstring)."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self.stale = dict.fromkeys(ADMISSION_STALE_REASONS, 0)  # reason -> lost admissions
        self.admitted: dict[str, int] = {}  # lane -> winning admissions applied
        self.outcomes: dict[tuple[str, str], int] = {}  # (lane, outcome) -> outcomes applied
        self.fencing_events = 0  # admissions STALE FENCED, and this owner fenced
        self.due_lag: dict[str, Buckets] = {}  # lane -> due lag at admission
        self.outcome_latency: dict[str, Buckets] = {}  # lane -> admission to outcome
        self._pending: dict[str, tuple[str, float]] = {}  # attempt -> (lane, admitted at)
        self.claims: dict[str, int] = {}  # lane -> claims made
        self.claim_latency: dict[str, Buckets] = {}  # lane -> local preparation time
        self.revocations: dict[tuple[str, str], int] = {}  # (lane, reason) -> claims revoked

    def claimed(self, lane: str, prepare_s: float) -> None:
        """A claim was made on ``lane`` in ``prepare_s`` seconds (``ClaimWatch``)."""
        self.claims[lane] = self.claims.get(lane, 0) + 1
        buckets = self.claim_latency.get(lane)
        if buckets is None:
            buckets = self.claim_latency[lane] = Buckets(CLAIM_LATENCY_BUCKETS_S)
        buckets.observe(max(prepare_s, 0.0))

    def revoked(self, lane: str, reason: Revocation) -> None:
        """A claim on ``lane`` ended before its attempt reached a publisher."""
        key = (lane, reason.value)
        self.revocations[key] = self.revocations.get(key, 0) + 1

    def observe(self, applied: Applied, claims: ClaimLookup) -> None:
        """An applied PUBLISH_ADMISSION or PUBLISH_OUTCOME (``OBSERVED``); re-deliveries of
        the same bytes are not counted twice."""
        if applied.duplicate:
            return
        record = applied.record
        if type(record) is PublishAdmission:
            self._admission(record, applied, claims)
        elif type(record) is PublishOutcome:
            self._outcome(record, applied)

    def fenced(self) -> None:
        """This owner saw a later owner's activation and let the shard go."""
        self.fencing_events += 1

    def _admission(self, record: PublishAdmission, applied: Applied,
                   claims: ClaimLookup) -> None:
        result = applied.result
        if result.status != ResultStatus.APPLIED:
            reason = str(result.reason) if result.reason is not None else "NONE"
            self.stale[reason] = self.stale.get(reason, 0) + 1
            if reason == "FENCED":
                self.fencing_events += 1
            return
        lane = record.lane
        self.admitted[lane] = self.admitted.get(lane, 0) + 1
        claim = claims.for_attempt(record.attempt_id)
        if claim is None:  # another owner's, or replayed at recovery: no live timing
            return
        lag_ms = record.decided_earliest_ms - claim.template.action_at_ms
        buckets = self.due_lag.get(lane)
        if buckets is None:
            buckets = self.due_lag[lane] = Buckets(DUE_LAG_BUCKETS_S)
        buckets.observe(max(lag_ms, 0) / 1000)
        if len(self._pending) >= MAX_REMEMBERED:
            for attempt in list(self._pending)[: MAX_REMEMBERED // 2]:
                del self._pending[attempt]
        self._pending[record.attempt_id] = (lane, self._monotonic())

    def _outcome(self, record: PublishOutcome, applied: Applied) -> None:
        pending = self._pending.pop(record.attempt_id, None)
        if applied.result.status != ResultStatus.APPLIED:  # late, fenced: evidence only
            return
        lane = "" if pending is None else pending[0]
        key = (lane, str(record.outcome))
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        if pending is not None:
            buckets = self.outcome_latency.get(lane)
            if buckets is None:
                buckets = self.outcome_latency[lane] = Buckets(OUTCOME_LATENCY_BUCKETS_S)
            buckets.observe(max(self._monotonic() - pending[1], 0.0))
