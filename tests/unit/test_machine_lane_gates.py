"""Every lane gate the seeds name does something: quota, and the bound on attempts that
never reached the destination (LANE_UNAVAILABLE)."""

from __future__ import annotations

from nereus import records as r
from nereus.machine import Reason
from nereus.records import MessageState, Outcome, ResultStatus
from nereus.state.values import Result
from nereus.testing import MemoryShard
from tests.unit.builders import admission, op, outcome, schedule


def admit(shard: MemoryShard, mid: str, at_ms: int) -> Result:
    shard.apply(schedule(mid, 1_000))
    return shard.result(admission(shard, mid, f"a-{mid}", earliest=at_ms), broker_ms=at_ms)


def test_quota_is_admissions_per_second_from_broker_time() -> None:
    """Quota 3/s: three admissions at one broker instant win, the fourth is STALE
    QUOTA_EXCEEDED; a third of a second later one more token has refilled."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", quota=3, **op("q")))
    assert [admit(shard, f"m{n}", 10_000).status for n in range(3)] == [ResultStatus.APPLIED] * 3
    refused = admit(shard, "m3", 10_000)
    assert (refused.status, refused.reason) == (ResultStatus.STALE, Reason.QUOTA_EXCEEDED)
    message = shard.message("m3")
    assert message is not None and message.state == MessageState.SCHEDULED
    assert admit(shard, "m4", 10_200).status == ResultStatus.STALE  # 0.6 of a token
    assert admit(shard, "m5", 10_334).status == ResultStatus.APPLIED  # 1.002 tokens


def test_quota_allows_one_second_of_burst_at_most() -> None:
    """After a long idle time the bucket holds quota tokens, not more."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", quota=2, **op("q")))
    assert admit(shard, "m0", 1_000).status == ResultStatus.APPLIED
    results = [admit(shard, f"m{n}", 100_000).status for n in range(1, 4)]
    assert results == [ResultStatus.APPLIED, ResultStatus.APPLIED, ResultStatus.STALE]


def test_quota_decisions_replay_the_same() -> None:
    """The bucket lives in the replicated lane value: replaying the log gives the same
    results and the same digest."""
    first = MemoryShard()
    log: list[tuple[bytes, int]] = []

    def apply(record: r.Record, at: int) -> None:
        data = r.encode(record)
        first.apply(data, broker_ms=at)
        log.append((data, at))

    apply(r.ActivationBarrier(barrier_id="b", owner_id="owner-a", fencing_epoch=1), 0)
    apply(r.LaneConfig(lane="local", quota=2, **op("q")), 0)
    for n in range(6):
        apply(schedule(f"m{n}", 1_000), 0)
        apply(admission(first, f"m{n}", f"a{n}", earliest=5_000 + n * 100), 5_000 + n * 100)
    second = MemoryShard()
    for data, at in log:
        second.apply(data, broker_ms=at)
    assert first.digest() == second.digest()
    lane = first.lane("local")
    assert lane is not None and lane.admissions == 3  # 2 of burst + 1 refilled in 0.5 s


def test_lane_unavailable_attempts_are_bounded() -> None:
    """Declined attempts (never reached the destination) return the message to the timeline
    until unavailable_max of them, then it is FAILED saying why."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", unavailable_max=3, retry_backoff_ms=0, **op("u")))
    shard.apply(schedule("m1", 1_000))
    for n in range(3):
        message = shard.message("m1")
        assert message is not None and message.state == MessageState.SCHEDULED
        shard.apply(admission(shard, "m1", f"a{n}", earliest=message.action_at_ms),
                    broker_ms=message.action_at_ms)
        shard.apply(outcome("m1", f"a{n}", Outcome.NOT_PUBLISHED,
                            r.Disposition.LANE_UNAVAILABLE))
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.FAILED
    assert message.unavailable == 3 and message.retries == 0
    assert "never reached the destination in 3 attempts" in (message.detail or "")
