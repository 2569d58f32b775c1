"""Small builders for state-machine tests: records with sensible defaults."""

from __future__ import annotations

from typing import TypedDict, Unpack

from nereus import records as r
from nereus.state import keys
from nereus.testing import MemoryShard


class ScheduleFields(TypedDict, total=False):
    """The optional fields of a SCHEDULE a test may set (``schedule(..., **fields)``)."""

    action_at_ms: int | None
    expire_at_ms: int | None
    key: str | None
    headers: dict[str, str]
    payload: bytes
    payload_ref: str | None


def schedule(mid: str, at: int = 1_000, *, cmd: str | None = None, lane: str = "local",
             **fields: Unpack[ScheduleFields]) -> r.Schedule:
    given: ScheduleFields = {"action_at_ms": at, **fields}  # action at deliverAt unless given
    return r.Schedule(command_id=cmd or f"s-{mid}", delay_message_id=mid, lane=lane,
                      deliver_at_ms=at, **given)


def cancel(mid: str, *, cmd: str | None = None) -> r.Cancel:
    return r.Cancel(command_id=cmd or f"c-{mid}", delay_message_id=mid)


def reschedule(mid: str, at: int, *, cmd: str | None = None) -> r.Reschedule:
    return r.Reschedule(command_id=cmd or f"r-{mid}-{at}", delay_message_id=mid,
                        deliver_at_ms=at, action_at_ms=at)


OWNER = "owner-a"


def barrier(owner: str = OWNER, epoch: int = 1, *, bid: str | None = None) -> r.ActivationBarrier:
    return r.ActivationBarrier(barrier_id=bid or f"b-{owner}-{epoch}", owner_id=owner,
                               fencing_epoch=epoch)


def activate(shard: MemoryShard, owner: str = OWNER, epoch: int = 1) -> None:
    """Make ``owner`` the live owner at ``epoch`` unless some owner already is."""
    if shard.get(keys.META_ACTIVATION) is None:
        assert shard.result(barrier(owner, epoch)).status == r.ResultStatus.APPLIED


def admission(shard: MemoryShard, mid: str, attempt: str, *, earliest: int | None = None,
              latest: int | None = None, epoch: int = 1,
              owner: str = OWNER) -> r.PublishAdmission:
    """An admission for the message's current timeline work, as a scheduler would claim it
    (the scheduler's owner is live: a shard with no activation yet is activated for it)."""
    activate(shard, owner, epoch)
    message = shard.message(mid)
    assert message is not None and message.work_digest is not None
    earliest = message.action_at_ms if earliest is None else earliest
    return r.PublishAdmission(
        attempt_id=attempt, delay_message_id=mid, generation=message.generation,
        work_digest=message.work_digest, lane=message.lane, claim_id=f"claim-{attempt}",
        claim_sequence=1, owner_id=owner, fencing_epoch=epoch, prepared_digest="p" * 8,
        decided_earliest_ms=earliest, decided_latest_ms=earliest + 5 if latest is None else latest,
    )


def outcome(mid: str, attempt: str, result: r.Outcome,
            disposition: r.Disposition = r.Disposition.NONE, *, oid: str | None = None,
            evidence: str = "offset 7", owner: str = OWNER, epoch: int = 1) -> r.PublishOutcome:
    return r.PublishOutcome(outcome_id=oid or f"o-{attempt}-{result}-{disposition}",
                            attempt_id=attempt, delay_message_id=mid, owner_id=owner,
                            fencing_epoch=epoch, outcome=result, disposition=disposition,
                            evidence=evidence)


class OperatorFields(TypedDict):
    """Who, why and the idempotency key of an Operator Mutation (``**op(key)``)."""

    operator: str
    reason: str
    idempotency_key: str


def op(key: str) -> OperatorFields:
    """Operator identity, reason and an idempotency key."""
    return {"operator": "alice", "reason": "testing", "idempotency_key": key}
