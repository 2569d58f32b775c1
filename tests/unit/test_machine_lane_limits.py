"""A lane's limits on new work (LANE_LIMITS): ``max_delay_ms`` against the record's broker
time, ``max_pending`` against the lane's unfinished messages; 0 is no limit, and work
already accepted is never touched."""

from __future__ import annotations

import pytest

from nereus import records as r
from nereus.machine import Reason
from nereus.records import ResultStatus
from nereus.state.values import Result
from nereus.testing import MemoryShard
from tests.unit.builders import op, schedule

DAY_MS = 86_400_000


def limits(shard: MemoryShard, *, max_delay_ms: int = 0, max_pending: int = 0,
           key: str = "limits") -> Result:
    return shard.result(r.LaneLimits(lane="local", max_delay_ms=max_delay_ms,
                                     max_pending=max_pending, **op(key)))


def test_a_lane_without_limits_takes_any_delay_and_any_backlog() -> None:
    """No LANE_LIMITS applied: a deliverAt years ahead and many pending messages apply."""
    shard = MemoryShard()
    for n in range(5):
        assert shard.result(schedule(f"m{n}", 3_000 * DAY_MS)).status == ResultStatus.APPLIED


def test_a_deliver_at_beyond_max_delay_is_rejected_naming_the_limit() -> None:
    """max_delay 400 d: deliverAt 400 d after the broker time applies, 1 ms more is
    REJECTED MAX_DELAY_EXCEEDED with both durations in the detail; nothing is stored."""
    shard = MemoryShard()
    assert limits(shard, max_delay_ms=400 * DAY_MS).status == ResultStatus.APPLIED
    now = 1_000_000
    ok = shard.result(schedule("at-limit", now + 400 * DAY_MS), broker_ms=now)
    assert ok.status == ResultStatus.APPLIED
    over = shard.result(schedule("over", now + 400 * DAY_MS + 1), broker_ms=now)
    assert (over.status, over.reason) == (ResultStatus.REJECTED, Reason.MAX_DELAY_EXCEEDED)
    assert "400d1ms after the record's broker time" in (over.detail or "")
    assert "max_delay = 400d" in (over.detail or "")
    assert shard.message("over") is None


def test_reschedule_is_held_to_max_delay_too() -> None:
    """A RESCHEDULE further than max_delay is REJECTED; the message keeps its time."""
    shard = MemoryShard()
    limits(shard, max_delay_ms=DAY_MS)
    shard.apply(schedule("m1", 10_000))
    moved = shard.result(r.Reschedule(command_id="r1", delay_message_id="m1",
                                      deliver_at_ms=10_000 + 2 * DAY_MS), broker_ms=5_000)
    assert moved.reason == Reason.MAX_DELAY_EXCEEDED
    message = shard.message("m1")
    assert message is not None and message.deliver_at_ms == 10_000


def test_a_full_lane_rejects_new_messages_until_one_finishes() -> None:
    """max_pending 2: the third SCHEDULE is REJECTED LANE_FULL; after a cancel one more
    fits. Raising the limit never touches what is there."""
    shard = MemoryShard()
    limits(shard, max_pending=2)
    assert shard.result(schedule("a", 10_000)).status == ResultStatus.APPLIED
    assert shard.result(schedule("b", 10_000)).status == ResultStatus.APPLIED
    full = shard.result(schedule("c", 10_000))
    assert (full.status, full.reason) == (ResultStatus.REJECTED, Reason.LANE_FULL)
    assert "holds 2 unfinished messages" in (full.detail or "")
    shard.apply(r.Cancel(command_id="x", delay_message_id="a"))
    assert shard.result(schedule("c", 10_000, cmd="s-c2")).status == ResultStatus.APPLIED


def test_zero_lifts_a_limit_and_the_same_limits_again_change_nothing() -> None:
    """LANE_LIMITS 0/0 lifts both limits; applying the same limits twice says so."""
    shard = MemoryShard()
    limits(shard, max_delay_ms=DAY_MS, max_pending=1)
    again = limits(shard, max_delay_ms=DAY_MS, max_pending=1, key="again")
    assert again.status == ResultStatus.APPLIED and "already" in (again.detail or "")
    assert limits(shard, key="lift").status == ResultStatus.APPLIED
    assert shard.result(schedule("a", 30 * DAY_MS)).status == ResultStatus.APPLIED
    assert shard.result(schedule("b", 30 * DAY_MS)).status == ResultStatus.APPLIED


@pytest.mark.parametrize("field", ["max_delay_ms", "max_pending"])
def test_a_negative_limit_is_an_invalid_field(field: str) -> None:
    """A negative limit is REJECTED INVALID_FIELD naming the field."""
    shard = MemoryShard()
    result = shard.result(r.LaneLimits(lane="local", **{field: -1}, **op("neg")))  # type: ignore[arg-type]
    assert (result.status, result.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
    assert field in (result.detail or "")
