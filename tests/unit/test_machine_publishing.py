"""PUBLISH_ADMISSION, PUBLISH_OUTCOME and CLAIM_RESULT in the shard state machine."""

from __future__ import annotations

from typing import Unpack

import msgspec

from nereus import records as r
from nereus.machine import Reason
from nereus.records import AttemptState, Disposition, MessageState, Outcome, ResultStatus
from nereus.state import keys
from nereus.testing import MemoryShard
from tests.unit.builders import (
    OWNER,
    ScheduleFields,
    activate,
    admission,
    cancel,
    op,
    outcome,
    reschedule,
    schedule,
)


def admitted(mid: str = "m1", attempt: str = "a1", **fields: Unpack[ScheduleFields]) -> MemoryShard:
    shard = MemoryShard()
    shard.apply(schedule(mid, 1_000, **fields))
    result = shard.result(admission(shard, mid, attempt), broker_ms=1_000)
    assert result.status == ResultStatus.APPLIED
    return shard


def test_winning_admission_makes_the_attempt_durably_publishing() -> None:
    """A winner writes the attempt ledger (PUBLISHING), an obligation and lane counters."""
    shard = admitted()
    attempt = shard.attempt("a1")
    message = shard.message("m1")
    assert attempt is not None and attempt.state == AttemptState.PUBLISHING
    assert message is not None and message.state == MessageState.PUBLISHING
    assert message.open_attempt_id == "a1" and message.attempts == 1
    assert shard.keys_with_prefix(keys.OBLIGATION) == [keys.obligation_key("m1", "a1")]
    assert shard.keys_with_prefix(keys.TIMELINE) == []
    lane = shard.lane("local")
    assert lane is not None and (lane.open_attempts, lane.admissions) == (1, 1)


def test_admission_after_cancel_is_stale_with_no_attempt() -> None:
    """Cancel first: the admission is STALE, no attempt exists, the message stays CANCELLED."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    adm = admission(shard, "m1", "a1")
    shard.apply(cancel("m1"))
    result = shard.result(adm, broker_ms=1_000)
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.STALE_MESSAGE_STATE)
    assert shard.attempt("a1") is None


def test_admission_for_an_old_generation_is_stale() -> None:
    """An admission claimed before a reschedule is STALE_GENERATION."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    adm = admission(shard, "m1", "a1")
    shard.apply(reschedule("m1", 1_000))
    assert shard.result(adm, broker_ms=1_000).reason == Reason.STALE_GENERATION


def test_admission_with_another_work_digest_is_stale() -> None:
    """The semantic-work digest must match the timeline entry that was claimed."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    adm = msgspec.structs.replace(admission(shard, "m1", "a1"), work_digest="not-it")
    assert shard.result(adm, broker_ms=1_000).reason == Reason.STALE_WORK


def test_admission_before_action_time_is_not_due() -> None:
    """Trusted UTC earliest before actionAt cannot admit: uncertainty never makes early."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 5_000))
    adm = admission(shard, "m1", "a1", earliest=4_999)
    assert shard.result(adm, broker_ms=4_999).reason == Reason.NOT_DUE


def test_admission_needs_proof_that_expiry_is_still_open() -> None:
    """With expireAt, the decision's latest bound must not pass it."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000, expire_at_ms=2_000))
    adm = admission(shard, "m1", "a1", earliest=1_990, latest=2_010)
    assert shard.result(adm, broker_ms=1_990).reason == Reason.EXPIRED
    ok = admission(shard, "m1", "a2", earliest=1_990, latest=2_000)
    assert shard.result(ok, broker_ms=1_990).status == ResultStatus.APPLIED


def test_an_admission_applied_after_expire_at_still_wins() -> None:
    """expireAt bounds the *decision*: an admission decided while expiry was provably open
    wins even when source lag applies it after expireAt (seed: source lag does not rewrite
    an already valid admission into rejection); one decided after it does not."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000, expire_at_ms=2_000))
    lagged = admission(shard, "m1", "a1", earliest=1_990, latest=2_000)
    result = shard.result(lagged, broker_ms=2_500)
    assert result.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.PUBLISHING
    shard.apply(schedule("m2", 1_000, expire_at_ms=2_000))
    late = admission(shard, "m2", "a2", earliest=2_001, latest=2_010)
    assert shard.result(late, broker_ms=2_010).reason == Reason.EXPIRED


def test_admission_from_a_clock_far_ahead_of_the_broker_is_stale() -> None:
    """A decision claiming a time well after the broker persisted it is TIME_EVIDENCE."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    adm = admission(shard, "m1", "a1", earliest=100_000)
    assert shard.result(adm, broker_ms=1_000).reason == Reason.TIME_EVIDENCE


def test_closed_lane_paused_shard_capacity_and_fencing_make_admission_stale() -> None:
    """Lane gate, shard pause, lane capacity and an older fencing epoch each stop admission."""
    shard = MemoryShard()
    for mid in ("m1", "m2", "m3"):
        shard.apply(schedule(mid, 1_000))
    shard.apply(r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close")))
    assert shard.result(admission(shard, "m1", "a1"), broker_ms=1_000).reason == \
        Reason.LANE_CLOSED
    shard.apply(r.LaneGate(lane="local", gate=r.Gate.OPEN, **op("open")))
    shard.apply(r.ShardPause(**op("pause")))
    assert shard.result(admission(shard, "m1", "a2"), broker_ms=1_000).reason == \
        Reason.SHARD_PAUSED
    shard.apply(r.ShardResume(**op("resume")))
    shard.apply(r.LaneConfig(lane="local", capacity=1, **op("cap")))
    assert shard.result(admission(shard, "m1", "a3"), broker_ms=1_000).status == \
        ResultStatus.APPLIED
    assert shard.result(admission(shard, "m2", "a4"), broker_ms=1_000).reason == \
        Reason.LANE_AT_CAPACITY
    shard.apply(r.ActivationBarrier(barrier_id="b", owner_id="new", fencing_epoch=7))
    shard.apply(r.LaneConfig(lane="local", capacity=10, **op("cap2")))
    assert shard.result(admission(shard, "m3", "a5", epoch=6), broker_ms=1_000).reason == \
        Reason.FENCED


def test_admission_enqueued_twice_admits_once() -> None:
    """An enqueue retry of the same admission bytes returns the first result, one attempt."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    adm = admission(shard, "m1", "a1")
    first = shard.apply(adm, broker_ms=1_000)
    again = shard.apply(adm, broker_ms=1_001)
    assert again.duplicate and again.result == first.result
    lane = shard.lane("local")
    assert lane is not None and lane.admissions == 1


def test_published_outcome_closes_the_obligation() -> None:
    """PUBLISHED: message PUBLISHED, attempt PUBLISHED with evidence, obligation gone."""
    shard = admitted()
    result = shard.result(outcome("m1", "a1", Outcome.PUBLISHED, evidence="p0@42"))
    assert result.status == ResultStatus.APPLIED
    message, attempt = shard.message("m1"), shard.attempt("a1")
    assert message is not None and message.state == MessageState.PUBLISHED
    assert attempt is not None and (attempt.state, attempt.evidence) == (
        AttemptState.PUBLISHED, "p0@42")
    assert shard.keys_with_prefix(keys.OBLIGATION) == []
    lane = shard.lane("local")
    assert lane is not None and lane.open_attempts == 0


def test_retriable_not_published_goes_back_to_the_timeline_with_backoff() -> None:
    """Retriable NOT_PUBLISHED closes the attempt and re-times the message with backoff."""
    shard = admitted()
    result = shard.apply(outcome("m1", "a1", Outcome.NOT_PUBLISHED, Disposition.RETRIABLE),
                         broker_ms=2_000).result
    assert result.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.SCHEDULED
    assert message.retries == 1 and message.action_at_ms == 2_000 + 1_000
    assert message.deliver_at_ms == 1_000
    assert shard.keys_with_prefix(keys.TIMELINE) == [keys.timeline_key("local", 3_000, "m1")]
    assert shard.keys_with_prefix(keys.OBLIGATION) == []


def test_retries_stop_at_the_lane_limit() -> None:
    """When retriable failures reach the lane's retry_max the message is FAILED."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", retry_max=2, retry_backoff_ms=10, **op("rm")))
    shard.apply(schedule("m1", 1_000))
    for n in (1, 2):
        message = shard.message("m1")
        assert message is not None
        broker = message.action_at_ms
        shard.apply(admission(shard, "m1", f"a{n}"), broker_ms=broker)
        shard.apply(outcome("m1", f"a{n}", Outcome.NOT_PUBLISHED, Disposition.RETRIABLE),
                    broker_ms=broker)
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.FAILED
    assert message.detail is not None and "retries exhausted" in message.detail


def test_permanent_not_published_fails_the_message() -> None:
    """Permanent NOT_PUBLISHED: message FAILED, obligation closed."""
    shard = admitted()
    shard.apply(outcome("m1", "a1", Outcome.NOT_PUBLISHED, Disposition.PERMANENT))
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.FAILED
    assert shard.keys_with_prefix(keys.OBLIGATION) == []


def test_unknown_outcome_makes_the_message_uncertain_and_keeps_the_obligation() -> None:
    """UNKNOWN: attempt UNKNOWN, message UNCERTAIN, obligation stays open."""
    shard = admitted()
    shard.apply(outcome("m1", "a1", Outcome.UNKNOWN, evidence="timeout after send"))
    message, attempt = shard.message("m1"), shard.attempt("a1")
    assert message is not None and message.state == MessageState.UNCERTAIN
    assert attempt is not None and attempt.state == AttemptState.UNKNOWN
    assert shard.keys_with_prefix(keys.OBLIGATION) == [keys.obligation_key("m1", "a1")]


def test_unknown_is_never_downgraded_to_not_published_by_an_outcome() -> None:
    """A NOT_PUBLISHED after UNKNOWN is kept as evidence, not applied; PUBLISHED settles it."""
    shard = admitted()
    shard.apply(outcome("m1", "a1", Outcome.UNKNOWN))
    kept = shard.result(outcome("m1", "a1", Outcome.NOT_PUBLISHED, Disposition.RETRIABLE))
    assert (kept.status, kept.reason) == (ResultStatus.RECORDED, Reason.UNKNOWN_NOT_DOWNGRADED)
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.UNCERTAIN
    settled = shard.result(outcome("m1", "a1", Outcome.PUBLISHED, evidence="found p0@9"))
    assert settled.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.PUBLISHED


def test_late_outcome_is_recorded_not_applied_twice() -> None:
    """An outcome for a settled attempt is RECORDED on the attempt; state is unchanged."""
    shard = admitted()
    shard.apply(outcome("m1", "a1", Outcome.PUBLISHED))
    before = shard.message("m1")
    late = shard.result(outcome("m1", "a1", Outcome.NOT_PUBLISHED, Disposition.RETRIABLE))
    assert (late.status, late.reason) == (ResultStatus.RECORDED, Reason.LATE_OUTCOME)
    assert shard.message("m1") == before
    attempt = shard.attempt("a1")
    assert attempt is not None and len(attempt.late_outcomes) == 1


def test_outcome_for_an_unknown_attempt_is_rejected() -> None:
    """An outcome naming no attempt is REJECTED ATTEMPT_NOT_FOUND."""
    shard = MemoryShard()
    assert shard.result(outcome("m1", "ghost", Outcome.PUBLISHED)).reason == \
        Reason.ATTEMPT_NOT_FOUND


def test_claim_result_permanent_error_fails_the_message() -> None:
    """CLAIM_RESULT PERMANENT_ERROR: FAILED without any attempt, timeline entry removed."""
    shard = MemoryShard()
    shard.apply(schedule("m1"))
    message = shard.message("m1")
    assert message is not None and message.work_digest is not None
    activate(shard)
    result = shard.result(r.ClaimResult(
        mutation_id="x1", delay_message_id="m1", generation=1, work_digest=message.work_digest,
        owner_id=OWNER, fencing_epoch=1, disposition=r.ClaimDisposition.PERMANENT_ERROR,
        detail="record too large",
        decided_earliest_ms=1_000, decided_latest_ms=1_001,
    ), broker_ms=1_000)
    assert result.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.FAILED
    assert shard.keys_with_prefix(keys.TIMELINE) == []
    assert shard.keys_with_prefix(keys.ATTEMPT) == []


def test_claim_result_expired_needs_proof() -> None:
    """CLAIM_RESULT EXPIRED applies only when earliest > expireAt; otherwise STALE."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000, expire_at_ms=2_000))
    message = shard.message("m1")
    assert message is not None and message.work_digest is not None
    work_digest = message.work_digest

    activate(shard)

    def expiry(mid: str, earliest: int) -> r.ClaimResult:
        return r.ClaimResult(
            mutation_id=mid, delay_message_id="m1", generation=1,
            work_digest=work_digest, owner_id=OWNER, fencing_epoch=1,
            disposition=r.ClaimDisposition.EXPIRED,
            decided_earliest_ms=earliest, decided_latest_ms=earliest + 10,
        )

    assert shard.result(expiry("e1", 2_000), broker_ms=2_000).reason == Reason.NOT_EXPIRED
    assert shard.result(expiry("e2", 2_001), broker_ms=2_001).status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.EXPIRED
