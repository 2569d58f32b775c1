"""deliverAt is a not-before boundary on every path (SCHEDULE, RESCHEDULE, retry, admission).

Only a destination that holds a message until deliverAt (a Pulsar ``deliver_at`` handoff)
may be handed it earlier, and only by the lead its lane's replicated policy grants.
"""

from __future__ import annotations

from nereus import records as r
from nereus.machine import Reason
from nereus.records import MessageState, Outcome, ResultStatus
from nereus.state.values import Result
from nereus.testing import MemoryShard
from tests.unit.builders import admission, op, outcome, schedule


def lead(shard: MemoryShard, ms: int, key: str = "lead") -> Result:
    return shard.result(r.LaneConfig(lane="local", handoff_lead_ms=ms, **op(f"{key}-{ms}")))


def test_an_early_action_time_is_rejected_on_a_lane_without_a_lead() -> None:
    """A plain-publish lane: actionAt before deliverAt is REJECTED naming both times."""
    shard = MemoryShard()
    result = shard.result(schedule("m1", 10_000, action_at_ms=9_000))
    assert (result.status, result.reason) == (ResultStatus.REJECTED,
                                              Reason.ACTION_BEFORE_DELIVER)
    assert "1000 ms before" in (result.detail or "") and "lead of 0 ms" in (result.detail or "")
    assert shard.message("m1") is None


def test_a_lead_the_lane_grants_is_accepted_and_one_longer_is_not() -> None:
    """Lane lead 5 s: actionAt 3 s early applies, 6 s early is REJECTED."""
    shard = MemoryShard()
    assert lead(shard, 5_000).status == ResultStatus.APPLIED
    assert shard.result(schedule("ok", 10_000, action_at_ms=7_000)).status == \
        ResultStatus.APPLIED
    late = shard.result(schedule("early", 10_000, action_at_ms=4_000))
    assert late.reason == Reason.ACTION_BEFORE_DELIVER


def test_no_action_time_means_deliver_at_less_the_lanes_lead() -> None:
    """SCHEDULE without actionAt: deliverAt less the replicated lead (deliverAt without one)."""
    shard = MemoryShard()
    shard.apply(r.Schedule(command_id="s0", delay_message_id="plain", lane="local",
                           deliver_at_ms=10_000))
    lead(shard, 2_500)
    shard.apply(r.Schedule(command_id="s1", delay_message_id="held", lane="local",
                           deliver_at_ms=10_000))
    plain, held = shard.message("plain"), shard.message("held")
    assert plain is not None and plain.action_at_ms == 10_000
    assert held is not None and held.action_at_ms == 7_500


def test_reschedule_keeps_the_lanes_lead() -> None:
    """RESCHEDULE without actionAt derives it like SCHEDULE; an early explicit one is
    REJECTED."""
    shard = MemoryShard()
    lead(shard, 2_000)
    shard.apply(r.Schedule(command_id="s", delay_message_id="m1", lane="local",
                           deliver_at_ms=10_000))
    moved = shard.result(r.Reschedule(command_id="r1", delay_message_id="m1",
                                      deliver_at_ms=20_000))
    assert moved.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.action_at_ms == 18_000
    early = shard.result(r.Reschedule(command_id="r2", delay_message_id="m1",
                                      deliver_at_ms=30_000, action_at_ms=27_000))
    assert early.reason == Reason.ACTION_BEFORE_DELIVER


def test_lowering_a_lead_is_refused_while_scheduled_messages_may_rely_on_it() -> None:
    """LEAD_IN_USE while the lane has SCHEDULED messages; raising it is always allowed, and
    lowering it is allowed once none is left."""
    shard = MemoryShard()
    lead(shard, 3_000)
    shard.apply(r.Schedule(command_id="s", delay_message_id="m1", lane="local",
                           deliver_at_ms=10_000))
    refused = lead(shard, 1_000)
    assert (refused.status, refused.reason) == (ResultStatus.REJECTED, Reason.LEAD_IN_USE)
    assert "1 SCHEDULED" in (refused.detail or "")
    assert lead(shard, 4_000).status == ResultStatus.APPLIED
    shard.apply(r.Cancel(command_id="c", delay_message_id="m1"))
    assert lead(shard, 0, key="drained").status == ResultStatus.APPLIED


def test_a_retry_never_moves_before_deliver_at_less_the_current_lead() -> None:
    """Admitted under a 5 s lead, the lead lowered to 0 while PUBLISHING, a retriable
    failure: the retry is due no earlier than deliverAt, and an admission before it is
    STALE NOT_DUE."""
    shard = MemoryShard()
    lead(shard, 5_000)
    shard.apply(r.Schedule(command_id="s", delay_message_id="m1", lane="local",
                           deliver_at_ms=100_000, action_at_ms=95_000))
    assert shard.result(admission(shard, "m1", "a1", earliest=95_000),
                        broker_ms=95_000).status == ResultStatus.APPLIED
    assert lead(shard, 0).status == ResultStatus.APPLIED  # nothing SCHEDULED now
    shard.apply(outcome("m1", "a1", Outcome.NOT_PUBLISHED, r.Disposition.RETRIABLE),
                broker_ms=95_100)
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.SCHEDULED
    assert message.action_at_ms >= 100_000
    forced = admission(shard, "m1", "a2", earliest=99_000)
    stale = shard.result(forced, broker_ms=99_000)
    assert (stale.status, stale.reason) == (ResultStatus.STALE, Reason.NOT_DUE)


def test_an_admission_before_deliver_at_less_the_lead_is_stale() -> None:
    """Even an admission for an early actionAt waits for deliverAt less the lane's lead."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 10_000))
    early = shard.result(admission(shard, "m1", "a1", earliest=9_999), broker_ms=9_999)
    assert (early.status, early.reason) == (ResultStatus.STALE, Reason.NOT_DUE)
