"""Fencing with two owners, for every system record kind (seed 000 sections 2-4).

Owner A activates epoch 1 and admits an attempt; owner B then activates epoch 2. From then
on, A (older epoch), C (B's epoch, another owner) and B at an epoch no barrier activated
are all fenced: their admissions and claim results are refused, their outcomes are
evidence only, their checkpoint marks are kept for the audit trail, and their barriers
do not take the shard back.
"""

from __future__ import annotations

import pytest

from nereus import records as r
from nereus.machine import Reason
from nereus.records import AttemptState, MessageState, Outcome, ResultStatus
from nereus.state import keys
from nereus.state.values import Activation, decode_value
from nereus.testing import MemoryShard
from tests.unit.builders import admission, barrier, outcome, schedule

A, B, C = "owner-a", "owner-b", "owner-c"
# (owner, epoch) pairs that are not the live owner once B has activated epoch 2
FENCED_OWNERS = [pytest.param(A, 1, id="older-epoch"), pytest.param(C, 2, id="equal-epoch"),
                 pytest.param(B, 3, id="never-activated")]


def live(shard: MemoryShard) -> tuple[str, int]:
    raw = shard.get(keys.META_ACTIVATION)
    assert raw is not None
    active = decode_value(raw, Activation)
    return active.owner_id, active.fencing_epoch


def taken_over() -> MemoryShard:
    """A activated epoch 1 and admitted m1 (attempt a1); B then activated epoch 2."""
    shard = MemoryShard()
    shard.apply(barrier(A, 1))
    shard.apply(schedule("m1", 1_000))
    shard.apply(schedule("m2", 1_000))
    assert shard.result(admission(shard, "m1", "a1", owner=A, epoch=1),
                        broker_ms=1_000).status == ResultStatus.APPLIED
    assert shard.result(barrier(B, 2)).status == ResultStatus.APPLIED
    return shard


def claim_result(shard: MemoryShard, mid: str, owner: str, epoch: int) -> r.ClaimResult:
    message = shard.message(mid)
    assert message is not None and message.work_digest is not None
    return r.ClaimResult(
        mutation_id=f"x-{owner}-{epoch}", delay_message_id=mid, generation=message.generation,
        work_digest=message.work_digest, owner_id=owner, fencing_epoch=epoch,
        disposition=r.ClaimDisposition.PERMANENT_ERROR, detail="record too large",
        decided_earliest_ms=1_000, decided_latest_ms=1_001)


# ACTIVATION_BARRIER ----------------------------------------------------------------------
def test_an_equal_epoch_from_another_owner_is_fenced() -> None:
    """Two owners at epoch 1: the first barrier applied wins; the second is STALE FENCED."""
    shard = MemoryShard()
    assert shard.result(barrier(A, 1)).status == ResultStatus.APPLIED
    result = shard.result(barrier(B, 1))
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.FENCED)
    assert live(shard) == (A, 1)


def test_an_older_epoch_barrier_is_fenced_and_a_newer_one_takes_over() -> None:
    """B at epoch 2 takes over from A; A's epoch-1 barrier then changes nothing."""
    shard = taken_over()
    assert live(shard) == (B, 2)
    for owner, epoch in ((A, 1), (A, 2), (C, 2)):
        result = shard.result(barrier(owner, epoch, bid=f"late-{owner}-{epoch}"))
        assert (result.status, result.reason) == (ResultStatus.STALE, Reason.FENCED), (owner,
                                                                                       epoch)
    assert live(shard) == (B, 2)


def test_the_same_owner_may_activate_its_own_epoch_again() -> None:
    """A recovery that appended its barrier twice stays live (same owner, same epoch)."""
    shard = MemoryShard()
    shard.apply(barrier(A, 1, bid="first"))
    assert shard.result(barrier(A, 1, bid="second")).status == ResultStatus.APPLIED
    assert live(shard) == (A, 1)


# PUBLISH_ADMISSION -----------------------------------------------------------------------
@pytest.mark.parametrize(("owner", "epoch"), FENCED_OWNERS)
def test_a_fenced_owners_admission_is_refused(owner: str, epoch: int) -> None:
    """No attempt, message still SCHEDULED, STALE FENCED naming the live owner."""
    shard = taken_over()
    result = shard.result(admission(shard, "m2", "a2", owner=owner, epoch=epoch),
                          broker_ms=1_000)
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.FENCED)
    assert B in (result.detail or "")
    assert shard.attempt("a2") is None
    message = shard.message("m2")
    assert message is not None and message.state == MessageState.SCHEDULED


def test_the_live_owners_admission_wins() -> None:
    """B at epoch 2 admits m2."""
    shard = taken_over()
    result = shard.result(admission(shard, "m2", "a2", owner=B, epoch=2), broker_ms=1_000)
    assert result.status == ResultStatus.APPLIED


def test_no_admission_before_any_activation() -> None:
    """A shard nobody activated admits nothing."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    message = shard.message("m1")
    assert message is not None and message.work_digest is not None
    record = r.PublishAdmission(
        attempt_id="a1", delay_message_id="m1", generation=1, work_digest=message.work_digest,
        lane="local", claim_id="c", claim_sequence=1, owner_id=A, fencing_epoch=1,
        prepared_digest="p", decided_earliest_ms=1_000, decided_latest_ms=1_001)
    result = shard.result(record, broker_ms=1_000)
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.FENCED)


# CLAIM_RESULT ----------------------------------------------------------------------------
@pytest.mark.parametrize(("owner", "epoch"), FENCED_OWNERS)
def test_a_fenced_owners_claim_result_is_refused(owner: str, epoch: int) -> None:
    """A fenced owner's permanent pre-send error is its local judgement: refused."""
    shard = taken_over()
    result = shard.result(claim_result(shard, "m2", owner, epoch), broker_ms=1_000)
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.FENCED)
    message = shard.message("m2")
    assert message is not None and message.state == MessageState.SCHEDULED


def test_the_live_owners_claim_result_applies() -> None:
    """A CLAIM_RESULT of the live owner (same owner, same epoch) is applied."""
    shard = taken_over()
    result = shard.result(claim_result(shard, "m2", B, 2), broker_ms=1_000)
    assert result.status == ResultStatus.APPLIED
    message = shard.message("m2")
    assert message is not None and message.state == MessageState.FAILED


# PUBLISH_OUTCOME -------------------------------------------------------------------------
@pytest.mark.parametrize(("owner", "epoch"), FENCED_OWNERS)
@pytest.mark.parametrize(("result_kind", "disposition"), [
    (Outcome.NOT_PUBLISHED, r.Disposition.RETRIABLE),
    (Outcome.NOT_PUBLISHED, r.Disposition.PERMANENT),
    (Outcome.NOT_PUBLISHED, r.Disposition.LANE_UNAVAILABLE),
    (Outcome.UNKNOWN, r.Disposition.NONE),
])
def test_a_fenced_owners_outcome_other_than_published_is_only_recorded(
        owner: str, epoch: int, result_kind: Outcome, disposition: r.Disposition) -> None:
    """Kept on the attempt as evidence; the attempt stays PUBLISHING, nothing downgraded."""
    shard = taken_over()
    record = outcome("m1", "a1", result_kind, disposition, owner=owner, epoch=epoch)
    result = shard.result(record)
    assert (result.status, result.reason) == (ResultStatus.RECORDED, Reason.FENCED)
    attempt = shard.attempt("a1")
    assert attempt is not None and attempt.state == AttemptState.PUBLISHING
    assert [late.outcome for late in attempt.late_outcomes] == [result_kind]
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.PUBLISHING


@pytest.mark.parametrize(("owner", "epoch"), FENCED_OWNERS)
def test_a_fenced_owners_published_outcome_with_evidence_settles(owner: str,
                                                                 epoch: int) -> None:
    """PUBLISHED with destination evidence is evidence, whoever saw it: the message is
    PUBLISHED. Without evidence it is only recorded."""
    shard = taken_over()
    bare = outcome("m1", "a1", Outcome.PUBLISHED, owner=owner, epoch=epoch, evidence=" ",
                   oid="bare")
    assert shard.result(bare).status == ResultStatus.RECORDED
    proven = outcome("m1", "a1", Outcome.PUBLISHED, owner=owner, epoch=epoch,
                     evidence="kafka:out/0@17")
    assert shard.result(proven).status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.PUBLISHED


def test_the_live_owner_settles_an_earlier_owners_attempt() -> None:
    """B's UNKNOWN for A's PUBLISHING attempt applies (recovery): the message is UNCERTAIN."""
    shard = taken_over()
    result = shard.result(outcome("m1", "a1", Outcome.UNKNOWN, owner=B, epoch=2))
    assert result.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.UNCERTAIN


# CHECKPOINT_MARK -------------------------------------------------------------------------
@pytest.mark.parametrize(("owner", "epoch"), FENCED_OWNERS)
def test_a_fenced_owners_checkpoint_mark_is_only_recorded(owner: str, epoch: int) -> None:
    """The shard's mark stays the live owner's; the fenced one is kept for the audit."""
    shard = taken_over()
    ours = r.CheckpointMark(mutation_id="m-live", checkpoint_id="cp-live", owner_id=B,
                            fencing_epoch=2)
    assert shard.result(ours).status == ResultStatus.APPLIED
    before = shard.get(keys.META_CHECKPOINT_MARK)
    theirs = r.CheckpointMark(mutation_id="m-fenced", checkpoint_id="cp-fenced",
                              owner_id=owner, fencing_epoch=epoch)
    result = shard.result(theirs)
    assert (result.status, result.reason) == (ResultStatus.RECORDED, Reason.FENCED)
    assert shard.get(keys.META_CHECKPOINT_MARK) == before
