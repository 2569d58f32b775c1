"""Every input of apply is in the log (issue 37): the ``[shard]`` limits travel as a
SHARD_LIMITS record, and records an engine writes name their owner and epoch.

Before, apply took the limits from the configuration of whoever applied the log, so a
replay with another ``nereus.toml`` decided differently; and a LANE_CONFIG, LANE_LIMITS or
SHARD_RETENTION from a replaced owner was applied like the live owner's."""

from __future__ import annotations

import pytest

from nereus import records as r
from nereus.machine import DEFAULT_LIMITS, Limits, Reason
from nereus.records import ResultStatus
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, activate, barrier, op, schedule

TIGHT = Limits(max_headers=1)


def limits_record(limits: Limits, key: str = "limits", **fence: object) -> r.ShardLimits:
    return r.ShardLimits(limits=limits, **op(key), **fence)  # type: ignore[arg-type]


def two_headers(mid: str) -> r.Schedule:
    return schedule(mid, 1_000, headers={"a": "1", "b": "2"})


@pytest.mark.parametrize("caller", [DEFAULT_LIMITS, Limits(max_headers=50)])
def test_replicated_limits_bind_whatever_the_caller_passes(caller: Limits) -> None:
    """After a SHARD_LIMITS of one header at most, a SCHEDULE with two is REJECTED whatever
    limits the applier was given, and every applier reaches the same digest; before it,
    the caller's limits bind."""
    shard = MemoryShard(limits=caller)
    assert shard.result(two_headers("before")).status == ResultStatus.APPLIED
    assert shard.result(limits_record(TIGHT)).status == ResultStatus.APPLIED
    refused = shard.result(two_headers("after"))
    assert (refused.status, refused.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
    other = MemoryShard(limits=Limits(max_headers=50) if caller == DEFAULT_LIMITS else
                        DEFAULT_LIMITS)
    for record in (two_headers("before"), limits_record(TIGHT), two_headers("after")):
        other.apply(record)
    assert other.digest() == shard.digest()


def test_the_clock_lead_bound_is_replicated() -> None:
    """max_clock_ahead_ms from SHARD_LIMITS decides TIME_EVIDENCE: a decision 3 s ahead of
    the broker is STALE under the default bound and wins under a replicated 5 s one."""
    from tests.unit.builders import admission

    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    early = admission(shard, "m1", "a1", earliest=4_000)
    assert shard.result(early, broker_ms=1_000).reason == Reason.TIME_EVIDENCE
    shard.apply(limits_record(Limits(max_clock_ahead_ms=5_000)))
    assert shard.result(admission(shard, "m1", "a2", earliest=4_000),
                        broker_ms=1_000).status == ResultStatus.APPLIED


def _engine_records(owner: str, epoch: int, key: str) -> list[r.Record]:
    fence = {"owner_id": owner, "fencing_epoch": epoch}
    return [
        r.LaneConfig(lane="local", capacity=5, **op(f"cfg-{key}"), **fence),  # type: ignore[arg-type]
        r.LaneLimits(lane="local", max_pending=7, **op(f"lim-{key}"), **fence),  # type: ignore[arg-type]
        r.ShardRetention(dedup_window_ms=60_000, **op(f"ret-{key}"), **fence),  # type: ignore[arg-type]
        limits_record(TIGHT, f"shl-{key}", **fence),
    ]


def test_an_engine_record_from_a_replaced_owner_is_fenced() -> None:
    """owner-a activated at epoch 1, then owner-b at 2: owner-a's LANE_CONFIG,
    LANE_LIMITS, SHARD_RETENTION and SHARD_LIMITS are STALE FENCED and change nothing;
    owner-b's are applied."""
    shard = MemoryShard()
    activate(shard, OWNER, 1)
    assert shard.result(barrier("owner-b", 2)).status == ResultStatus.APPLIED
    before = shard.digest()
    for record in _engine_records(OWNER, 1, "a"):
        result = shard.result(record)
        assert (result.status, result.reason) == (ResultStatus.STALE, Reason.FENCED), record
        assert "owner-a" in (result.detail or "")
    lane = shard.lane("local")
    assert lane is None or lane.capacity is None
    for record in _engine_records("owner-b", 2, "b"):
        assert shard.result(record).status == ResultStatus.APPLIED, record
    assert shard.digest() != before


def test_an_operators_own_mutation_names_no_owner_and_is_not_fenced() -> None:
    """``lane set`` by an operator carries no owner or epoch: applied whoever is live; one
    naming only an owner or only an epoch is REJECTED INVALID_FIELD."""
    shard = MemoryShard()
    activate(shard, OWNER, 1)
    assert shard.result(r.LaneConfig(lane="local", capacity=5, **op("c1"))).status == \
        ResultStatus.APPLIED
    half = r.LaneConfig(lane="local", capacity=6, owner_id="x", **op("c2"))
    assert shard.result(half).reason == Reason.INVALID_FIELD


def test_operator_records_without_an_owner_keep_their_bytes() -> None:
    """An operator mutation that names no owner encodes exactly as before the fields
    existed (UNSET fields are not encoded)."""
    record = r.LaneConfig(lane="local", capacity=5, **op("c1"))
    assert b"owner_id" not in r.encode(record) and b"fencing_epoch" not in r.encode(record)
