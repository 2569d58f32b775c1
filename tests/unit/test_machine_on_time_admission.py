"""expireAt closes new admissions only (seed 000 §4): a message whose admission won before
expireAt keeps it. Its retries — after a decline (NOT_PUBLISHED LANE_UNAVAILABLE: local
conditions such as a claim deadline or a lane NOT READY at hand-over), a retriable failure
or an operator's NOT_PUBLISHED — are admitted after expireAt too, bounded by ``retry_max``
and ``unavailable_max``; it ends PUBLISHED or FAILED, never EXPIRED. Before, the retry's
admission was STALE EXPIRED and the planner's CLAIM_RESULT EXPIRED ended the message."""

from __future__ import annotations

import pytest

from nereus import records as r
from nereus.machine import Reason
from nereus.records import Disposition, MessageState, Outcome, ResultStatus
from nereus.state.values import admission_expire_at_ms
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, admission, outcome, schedule


def declined(disposition: Disposition = Disposition.LANE_UNAVAILABLE) -> MemoryShard:
    """m1 due at 1,000, expiring at 1,500; admitted on time at 1,000, then not published
    (``disposition``) at 1,100: back on the timeline after its backoff, past expireAt."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000, expire_at_ms=1_500))
    assert shard.result(admission(shard, "m1", "a1"), broker_ms=1_000).status == \
        ResultStatus.APPLIED
    shard.apply(outcome("m1", "a1", Outcome.NOT_PUBLISHED, disposition), broker_ms=1_100)
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.SCHEDULED
    assert message.action_at_ms > 1_500
    return shard


@pytest.mark.parametrize("disposition", [Disposition.LANE_UNAVAILABLE, Disposition.RETRIABLE])
def test_a_retry_of_an_on_time_admission_is_admitted_after_expire_at(
        disposition: Disposition) -> None:
    """The retry is decided after expireAt: APPLIED, and its publish ends the message
    PUBLISHED."""
    shard = declined(disposition)
    message = shard.message("m1")
    assert message is not None
    retry = admission(shard, "m1", "a2", earliest=message.action_at_ms)
    assert shard.result(retry, broker_ms=message.action_at_ms).status == ResultStatus.APPLIED
    shard.apply(outcome("m1", "a2", Outcome.PUBLISHED), broker_ms=message.action_at_ms)
    published = shard.message("m1")
    assert published is not None and published.state == MessageState.PUBLISHED


def test_a_claim_result_cannot_expire_a_message_admitted_on_time() -> None:
    """CLAIM_RESULT EXPIRED for it is STALE NOT_EXPIRED saying it was admitted on time."""
    shard = declined()
    message = shard.message("m1")
    assert message is not None and message.work_digest is not None
    result = shard.result(r.ClaimResult(
        mutation_id="e1", delay_message_id="m1", generation=message.generation,
        work_digest=message.work_digest, owner_id=OWNER, fencing_epoch=1,
        disposition=r.ClaimDisposition.EXPIRED, decided_earliest_ms=5_000,
        decided_latest_ms=5_010), broker_ms=5_000)
    assert (result.status, result.reason) == (ResultStatus.STALE, Reason.NOT_EXPIRED)
    assert "admitted" in (result.detail or "")
    still = shard.message("m1")
    assert still is not None and still.state == MessageState.SCHEDULED


def test_a_message_never_admitted_still_expires() -> None:
    """expireAt still closes a first admission: decided after it, STALE EXPIRED."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000, expire_at_ms=1_500))
    late = admission(shard, "m1", "a1", earliest=1_600)
    assert shard.result(late, broker_ms=1_600).reason == Reason.EXPIRED
    message = shard.message("m1")
    assert message is not None and admission_expire_at_ms(message) == 1_500


def test_declines_are_still_bounded_by_unavailable_max() -> None:
    """An on-time admission declined again and again ends FAILED at the lane's
    unavailable_max, saying so (not EXPIRED, not retried for ever)."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", unavailable_max=3, operator="alice",
                             reason="testing", idempotency_key="cfg"))
    shard.apply(schedule("m1", 1_000, expire_at_ms=1_500))
    for n in range(3):
        message = shard.message("m1")
        assert message is not None and message.state == MessageState.SCHEDULED
        at = message.action_at_ms
        assert shard.result(admission(shard, "m1", f"a{n}", earliest=at), broker_ms=at).status \
            == ResultStatus.APPLIED
        shard.apply(outcome("m1", f"a{n}", Outcome.NOT_PUBLISHED,
                            Disposition.LANE_UNAVAILABLE), broker_ms=at)
    failed = shard.message("m1")
    assert failed is not None and failed.state == MessageState.FAILED
    assert "unavailable" in (failed.detail or "")
