"""Operator mutations and control records: identity, idempotency, preconditions, meanings."""

from __future__ import annotations

from typing import Literal

import msgspec
import pytest

from nereus import records as r
from nereus.machine import Reason, precondition_digest
from nereus.records import AttemptState, MessageState, Outcome, ResultStatus
from nereus.state import keys
from nereus.state.values import decode_value
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, activate, admission, op, outcome, schedule


@pytest.mark.parametrize(("missing", "reason"), [
    ("operator", Reason.MISSING_OPERATOR),
    ("reason", Reason.MISSING_REASON),
    ("idempotency_key", Reason.MISSING_IDEMPOTENCY_KEY),
])
def test_operator_mutations_need_identity_reason_and_key(
        missing: Literal["operator", "reason", "idempotency_key"], reason: Reason) -> None:
    """Without operator, reason or idempotency key a mutation is REJECTED naming what is missing."""
    shard = MemoryShard()
    fields = op("k1")
    fields[missing] = ""
    result = shard.result(r.LaneGate(lane="local", gate=r.Gate.CLOSED, **fields))
    assert (result.status, result.reason) == (ResultStatus.REJECTED, reason)
    assert shard.lane("local") is None


def test_same_idempotency_key_is_a_no_op_with_the_same_result() -> None:
    """Re-running an operator mutation (same bytes) returns the first result and changes nothing."""
    shard = MemoryShard()
    close = r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close-1"))
    first = shard.apply(close)
    again = shard.apply(close)
    assert again.duplicate and again.result == first.result


def test_lane_gate_closes_and_opens() -> None:
    """LANE_GATE sets the lane's source-ordered admissionGate."""
    shard = MemoryShard()
    shard.apply(r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("c")))
    lane = shard.lane("local")
    assert lane is not None and lane.gate == r.Gate.CLOSED and lane.gate_position == 0
    shard.apply(r.LaneGate(lane="local", gate=r.Gate.OPEN, **op("o")))
    lane = shard.lane("local")
    assert lane is not None and lane.gate == r.Gate.OPEN


def test_lane_config_validates_and_bumps_the_revision() -> None:
    """LANE_CONFIG applies positive values and refuses nonsense (retry_max 0, nothing to do)."""
    shard = MemoryShard()
    ok = shard.result(r.LaneConfig(lane="local", capacity=3, retry_max=4, ordered=True, **op("a")))
    assert ok.status == ResultStatus.APPLIED
    lane = shard.lane("local")
    assert lane is not None and (lane.capacity, lane.retry_max, lane.ordered,
                                 lane.config_revision) == (3, 4, True, 1)
    assert shard.result(r.LaneConfig(lane="local", retry_max=0, **op("b"))).reason == \
        Reason.INVALID_FIELD
    assert shard.result(r.LaneConfig(lane="local", **op("c"))).reason == Reason.INVALID_FIELD


def test_stale_precondition_digest_is_refused() -> None:
    """A mutation planned against state that changed since is STALE PRECONDITION_STALE."""
    shard = MemoryShard()
    planned = r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close"))
    seen = precondition_digest(shard, planned)
    shard.apply(r.LaneConfig(lane="local", capacity=5, **op("other")))
    result = shard.result(msgspec.structs.replace(planned, precondition_digest=seen))
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.PRECONDITION_STALE)
    fresh = msgspec.structs.replace(planned, idempotency_key="close-2",
                                    precondition_digest=precondition_digest(shard, planned))
    assert shard.result(fresh).status == ResultStatus.APPLIED


def uncertain_shard() -> MemoryShard:
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    shard.apply(admission(shard, "m1", "a1"), broker_ms=1_000)
    shard.apply(outcome("m1", "a1", Outcome.UNKNOWN))
    return shard


def test_attempt_resolve_published_settles_an_uncertain_message() -> None:
    """ATTEMPT_RESOLVE PUBLISHED with evidence: attempt PUBLISHED, message PUBLISHED."""
    shard = uncertain_shard()
    result = shard.result(r.AttemptResolve(attempt_id="a1", resolution=r.Resolution.PUBLISHED,
                                           evidence="found offset 12", **op("res")))
    assert result.status == ResultStatus.APPLIED
    attempt, message = shard.attempt("a1"), shard.message("m1")
    assert attempt is not None and attempt.state == AttemptState.PUBLISHED
    assert attempt.settled_by == "OPERATOR:alice" and "found offset 12" in attempt.evidence
    assert message is not None and message.state == MessageState.PUBLISHED
    assert shard.keys_with_prefix(keys.OBLIGATION) == []


def test_attempt_resolve_not_published_puts_the_message_back() -> None:
    """ATTEMPT_RESOLVE NOT_PUBLISHED: attempt closed, message SCHEDULED on the timeline again."""
    shard = uncertain_shard()
    shard.apply(r.AttemptResolve(attempt_id="a1", resolution=r.Resolution.NOT_PUBLISHED,
                                 evidence="topic scanned, absent", **op("res")), broker_ms=5_000)
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.SCHEDULED
    assert message.open_attempt_id is None and len(shard.keys_with_prefix(keys.TIMELINE)) == 1


def test_attempt_resolve_needs_evidence_and_an_unknown_attempt() -> None:
    """No evidence, or an attempt still PUBLISHING, is refused."""
    shard = uncertain_shard()
    no_evidence = shard.result(r.AttemptResolve(attempt_id="a1", resolution=r.Resolution.PUBLISHED,
                                                evidence=" ", **op("r1")))
    assert no_evidence.reason == Reason.MISSING_EVIDENCE
    shard.apply(schedule("m2", 1_000))
    shard.apply(admission(shard, "m2", "a2"), broker_ms=1_000)
    live = shard.result(r.AttemptResolve(attempt_id="a2", resolution=r.Resolution.PUBLISHED,
                                         evidence="x", **op("r2")))
    assert live.reason == Reason.ATTEMPT_NOT_UNKNOWN


def test_message_break_fails_a_scheduled_message_but_not_an_admitted_one() -> None:
    """MESSAGE_BREAK takes a SCHEDULED message out (FAILED); admitted ones must be resolved."""
    shard = uncertain_shard()
    assert shard.result(r.MessageBreak(delay_message_id="m1", **op("b1"))).reason == \
        Reason.ATTEMPT_OPEN
    shard.apply(schedule("m2", 2_000))
    assert shard.result(r.MessageBreak(delay_message_id="m2", **op("b2"))).status == \
        ResultStatus.APPLIED
    message = shard.message("m2")
    assert message is not None and message.state == MessageState.FAILED
    assert message.detail is not None and "BROKEN by alice" in message.detail


def test_activation_barrier_records_the_owner_and_fences_older_epochs() -> None:
    """ACTIVATION_BARRIER records owner and epoch; an older epoch's barrier is STALE FENCED."""
    shard = MemoryShard()
    assert shard.result(r.ActivationBarrier(barrier_id="b1", owner_id="n1",
                                            fencing_epoch=3)).status == ResultStatus.APPLIED
    assert shard.result(r.ActivationBarrier(barrier_id="b2", owner_id="n0",
                                            fencing_epoch=2)).reason == Reason.FENCED
    assert shard.get(keys.META_ACTIVATION) is not None


def test_checkpoint_mark_is_recorded() -> None:
    """CHECKPOINT_MARK of the live owner stores which checkpoint was marked at which position."""
    shard = MemoryShard()
    activate(shard)
    shard.apply(schedule("m1"))
    assert shard.result(r.CheckpointMark(mutation_id="x", checkpoint_id="cp-1", owner_id=OWNER,
                                         fencing_epoch=1)).status == ResultStatus.APPLIED
    assert shard.get(keys.META_CHECKPOINT_MARK) is not None


def test_the_first_route_identity_stays() -> None:
    """ROUTE_IDENTITY: the first is the shard's; the same again changes nothing; another
    route's (or another partition count) is REJECTED ROUTE_MISMATCH naming both."""
    shard = MemoryShard()
    ours = r.RouteIdentity(route_id="aa11", route="default", partition=0, partitions=2)
    assert shard.result(ours).status == ResultStatus.APPLIED
    again = shard.result(r.encode(ours))
    assert again.status == ResultStatus.APPLIED
    for other in (r.RouteIdentity(route_id="bb22", route="default", partition=0, partitions=2),
                  r.RouteIdentity(route_id="aa11", route="default", partition=0, partitions=3)):
        refused = shard.result(other)
        assert (refused.status, refused.reason) == (ResultStatus.REJECTED,
                                                    Reason.ROUTE_MISMATCH)
        assert "aa11" in (refused.detail or "")
    raw = shard.get(keys.META_ROUTE)
    assert raw is not None and decode_value(raw, r.RouteIdentity) == ours
