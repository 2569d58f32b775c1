"""The idempotency key the CLI derives for an operator mutation (``nereus.operator.plan``):
a retry finds the first result; the same command again after its change was undone is a
new request (found by the chaos runs: ``lane close``, ``open``, ``close`` left the lane
OPEN, the last close answered with the first one's result)."""

from __future__ import annotations

from nereus import records as r
from nereus.operator.plan import plan_mutation
from nereus.records import Gate, ResultStatus
from nereus.state import keys
from nereus.state.values import Lane
from nereus.testing import MemoryShard

WHO = "alice"
WHY = "maintenance"


def submit(shard: MemoryShard, mutation: r.OperatorMutation) -> tuple[str, r.ResultStatus,
                                                                       bool]:
    """Plan ``mutation`` with a derived key and append it: (its key, its result, whether
    the plan found an earlier result)."""
    plan = plan_mutation(shard, mutation, shard="default/0", broker_ms=1_000)
    result = shard.result(plan.data, broker_ms=1_000)
    return plan.record.idempotency_key, result.status, plan.earlier is not None


def lane(shard: MemoryShard) -> Lane:
    found = shard.lane("local")
    assert found is not None
    return found


def test_a_retry_finds_the_first_result() -> None:
    """The same close twice in a row: the second derives the first's key and finds its
    result (nothing new applied)."""
    shard = MemoryShard()
    close = r.LaneGate(lane="local", gate=Gate.CLOSED, operator=WHO, reason=WHY)
    first, status, earlier = submit(shard, close)
    assert status == ResultStatus.APPLIED and not earlier
    again, _, earlier = submit(shard, close)
    assert again == first and earlier


def test_the_same_command_after_its_change_was_undone_is_a_new_request() -> None:
    """close, open, close (same reason): the last close gets a key of its own and closes
    the lane; pause, resume, pause, resume likewise ends resumed."""
    shard = MemoryShard()
    derived = []
    for gate in (Gate.CLOSED, Gate.OPEN, Gate.CLOSED):
        gate_change = r.LaneGate(lane="local", gate=gate, operator=WHO, reason=WHY)
        key, status, earlier = submit(shard, gate_change)
        assert status == ResultStatus.APPLIED and not earlier
        derived.append(key)
    assert len(set(derived)) == 3 and lane(shard).gate == Gate.CLOSED
    pause, resume = r.ShardPause(operator=WHO, reason=WHY), r.ShardResume(operator=WHO, reason=WHY)
    for mutation in (pause, resume, pause, resume):
        assert submit(shard, mutation)[2] is False
    assert shard.get(keys.META_PAUSED) is None


def test_a_lane_set_that_changes_nothing_keeps_its_revision_and_its_first_result() -> None:
    """``lane set --capacity 5`` twice: one config revision, and the retry finds the first
    result; a LANE_CONFIG with the values the lane already has is applied without a new
    revision."""
    shard = MemoryShard()
    capacity = r.LaneConfig(lane="local", capacity=5, operator=WHO, reason=WHY)
    first, _, _ = submit(shard, capacity)
    assert lane(shard).config_revision == 1
    again, _, earlier = submit(shard, capacity)
    assert again == first and earlier and lane(shard).config_revision == 1
    same = shard.result(r.LaneConfig(lane="local", capacity=5, idempotency_key="other",
                                     operator=WHO, reason=WHY))
    assert same.status == ResultStatus.APPLIED and "already" in (same.detail or "")
    assert lane(shard).config_revision == 1
