"""System Mutation handlers of the publish path: admission, outcome, claim result.

PUBLISH_ADMISSION is the point of no return. It is validated only against
source-replayable state and the time evidence carried in the record; a winner makes the
attempt durably PUBLISHING in the same WriteBatch as everything else, a loser leaves a
deterministic STALE result and no attempt. A lost producer response is UNKNOWN, which
makes the message UNCERTAIN; only positive evidence (PUBLISH_OUTCOME PUBLISHED) or an
operator (ATTEMPT_RESOLVE) settles it. Nothing here ever turns UNKNOWN into NOT_PUBLISHED.
"""

from __future__ import annotations

import msgspec

from nereus.machine.fencing import fenced
from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx, quota_tokens_milli, retry_backoff_ms
from nereus.machine.verdict import Ids, Verdict, applied, recorded, rejected, stale
from nereus.records.system import ClaimResult, PublishAdmission, PublishOutcome
from nereus.records.vocabulary import (
    AttemptState,
    ClaimDisposition,
    Disposition,
    Gate,
    MessageState,
    Outcome,
)
from nereus.state import keys
from nereus.state.values import (
    Attempt,
    Lane,
    LateOutcome,
    Message,
    Obligation,
    admission_expire_at_ms,
    encode_value,
)


def _check_time(tx: Tx, earliest_ms: int, latest_ms: int) -> Verdict | None:
    if latest_ms < earliest_ms:
        return rejected(
            Reason.INVALID_FIELD,
            f"decided_latest_ms {latest_ms} is before decided_earliest_ms {earliest_ms}",
        )
    if earliest_ms > tx.broker_ms + tx.limits.max_clock_ahead_ms:
        return stale(
            Reason.TIME_EVIDENCE,
            f"the decision's earliest time {earliest_ms} is more than "
            f"{tx.limits.max_clock_ahead_ms} ms after the broker persisted the record "
            f"({tx.broker_ms}); the deciding clock is ahead",
        )
    return None


def _check_work(
    tx: Tx, delay_message_id: str, generation: int, work_digest: str
) -> tuple[Message | None, Verdict | None]:
    """The message if it is still the SCHEDULED work a claim saw, else a STALE verdict."""
    message = tx.message(delay_message_id)
    ids: Ids = {"delay_message_id": delay_message_id, "generation": generation}
    if message is None:
        return None, stale(Reason.STALE_MESSAGE_STATE, "the message does not exist", **ids)
    if message.state != MessageState.SCHEDULED:
        return None, stale(
            Reason.STALE_MESSAGE_STATE,
            f"the message is {message.state}, not SCHEDULED (cancelled, expired, broken or "
            "admitted since the claim)",
            **ids,
        )
    if message.generation != generation:
        return None, stale(
            Reason.STALE_GENERATION,
            f"the message is at generation {message.generation}, the claim saw {generation}",
            **ids,
        )
    if message.work_digest != work_digest:
        return None, stale(
            Reason.STALE_WORK, "the timeline work changed since the claim (retry or move)", **ids
        )
    return message, None


def admission(tx: Tx, rec: PublishAdmission) -> Verdict:
    """PUBLISH_ADMISSION: the time evidence, the claimed work, the claim and its owner, then
    the lane's gates, in that order; the first that fails is the verdict (STALE or REJECTED,
    nothing written). A winner opens the attempt."""
    failure = _check_time(tx, rec.decided_earliest_ms, rec.decided_latest_ms)
    if failure is not None:
        return failure
    message, failure = _check_work(tx, rec.delay_message_id, rec.generation, rec.work_digest)
    if message is None:
        assert failure is not None
        return failure
    failure = _check_claim(tx, rec, message)
    if failure is not None:
        return failure
    lane, failure = _check_lane(tx, rec, message)
    if failure is not None:
        return failure
    _open_attempt(tx, rec, message, lane)
    return applied(attempt_id=rec.attempt_id, delay_message_id=rec.delay_message_id,
                   generation=rec.generation)


def _admission_ids(rec: PublishAdmission) -> Ids:
    return {"delay_message_id": rec.delay_message_id, "generation": rec.generation}


def _check_claim(tx: Tx, rec: PublishAdmission, message: Message) -> Verdict | None:
    """The admission names the message's lane and a fresh attempt id, comes from the live
    owner, and the shard is not paused."""
    ids = _admission_ids(rec)
    if rec.lane != message.lane:
        return rejected(
            Reason.INVALID_FIELD, f"lane {rec.lane} is not the message's lane {message.lane}",
            **ids,
        )
    if tx.attempt(rec.attempt_id) is not None:
        return rejected(Reason.INVALID_FIELD, f"attempt id {rec.attempt_id} is already used", **ids)
    why = fenced(tx, rec.owner_id, rec.fencing_epoch)
    if why is not None:
        return stale(Reason.FENCED, f"admission refused: {why}", **ids)
    if tx.paused():
        return stale(Reason.SHARD_PAUSED, "the shard is paused by an operator", **ids)
    return None


def _check_lane(tx: Tx, rec: PublishAdmission, message: Message) -> tuple[Lane, Verdict | None]:
    """The lane's gates: admissionGate OPEN, under capacity, the decision proves the work
    due (actionAt, and deliverAt less the lead) and expiry still open, and a quota token is
    left. Returns the lane as the winner leaves it (its token spent) and the failure."""
    ids = _admission_ids(rec)
    lane = tx.lane(message.lane)
    if lane.gate != Gate.OPEN:
        return lane, stale(Reason.LANE_CLOSED, f"lane {lane.name} admissionGate is CLOSED",
                           **ids)
    if lane.capacity is not None and lane.open_attempts >= lane.capacity:
        return lane, stale(
            Reason.LANE_AT_CAPACITY,
            f"lane {lane.name} has {lane.open_attempts} open attempts (capacity {lane.capacity})",
            **ids,
        )
    due_at = max(message.action_at_ms, message.deliver_at_ms - lane.handoff_lead_ms)
    if rec.decided_earliest_ms < due_at:
        return lane, stale(
            Reason.NOT_DUE,
            f"Trusted UTC earliest {rec.decided_earliest_ms} is before actionAt "
            f"{message.action_at_ms} (deliverAt {message.deliver_at_ms} less lane "
            f"{lane.name}'s handoff lead {lane.handoff_lead_ms} ms: {due_at})",
            **ids,
        )
    expire_at_ms = admission_expire_at_ms(message)
    if expire_at_ms is not None and rec.decided_latest_ms > expire_at_ms:
        return lane, stale(
            Reason.EXPIRED,
            f"Trusted UTC latest {rec.decided_latest_ms} does not prove expireAt "
            f"{expire_at_ms} is still open",
            **ids,
        )
    failure = _check_head(tx, lane, message)
    if failure is not None:
        return lane, failure
    if lane.quota is not None:
        tokens, as_of = quota_tokens_milli(lane, tx.broker_ms)
        if tokens < 1_000:
            return lane, stale(
                Reason.QUOTA_EXCEEDED,
                f"lane {lane.name} admits {lane.quota} per second and its bucket is spent "
                f"({tokens / 1_000:.3f} tokens at broker time {as_of})",
                **ids,
            )
        lane = msgspec.structs.replace(lane, quota_tokens_milli=tokens - 1_000,
                                       quota_at_ms=as_of)
    return lane, None


def _check_head(tx: Tx, lane: Lane, message: Message) -> Verdict | None:
    """On an ORDERED lane, only the first message of a key's queue is admitted: none of the
    key in flight, and no SCHEDULED one with an earlier deliverAt (or an equal one scheduled
    first). Whatever put that one back on the timeline, or scheduled it after a claim of
    this one, the key's order holds."""
    if not lane.ordered or message.key is None:
        return None
    head = tx.order_head(lane.name, message.key)
    if head is None or head[0] == message.delay_message_id:
        return None
    holder, in_flight = head
    why = "has an attempt in flight" if in_flight else "is due first (an earlier deliverAt)"
    return stale(Reason.NOT_ORDERED_HEAD,
                 f"lane {lane.name} is ORDERED and message {holder} of key {message.key!r} "
                 f"{why}; this message waits for it",
                 delay_message_id=message.delay_message_id, generation=message.generation)


def _open_attempt(tx: Tx, rec: PublishAdmission, message: Message, lane: Lane) -> None:
    """The winner: the attempt PUBLISHING, its number, the open obligation, the lane's
    counters and the message PUBLISHING, off the timeline."""
    attempt_no = message.attempts + 1
    tx.put_attempt(Attempt(
        attempt_id=rec.attempt_id, delay_message_id=message.delay_message_id,
        generation=message.generation, attempt_no=attempt_no, lane=message.lane,
        state=AttemptState.PUBLISHING, claim_id=rec.claim_id, owner_id=rec.owner_id,
        fencing_epoch=rec.fencing_epoch, prepared_digest=rec.prepared_digest,
        admitted_position=tx.position, admitted_broker_ms=tx.broker_ms,
    ))
    tx.put(keys.msg_attempt_key(message.delay_message_id, attempt_no), rec.attempt_id.encode())
    tx.put(
        keys.obligation_key(message.delay_message_id, rec.attempt_id),
        encode_value(Obligation(
            attempt_id=rec.attempt_id, lane=message.lane, key=message.key,
            state=AttemptState.PUBLISHING, since_position=tx.position,
        )),
    )
    tx.put_lane(msgspec.structs.replace(
        lane, open_attempts=lane.open_attempts + 1, admissions=lane.admissions + 1,
        last_decided_ms=max(lane.last_decided_ms, rec.decided_earliest_ms),
    ))
    publishing = tx.move_state(
        tx.drop_timeline(message), MessageState.PUBLISHING,
        attempts=attempt_no, open_attempt_id=rec.attempt_id,
    )
    tx.save_message(message, publishing)


def _close_obligation(tx: Tx, attempt: Attempt) -> None:
    tx.delete(keys.obligation_key(attempt.delay_message_id, attempt.attempt_id))
    lane = tx.lane(attempt.lane)
    tx.put_lane(msgspec.structs.replace(lane, open_attempts=max(lane.open_attempts - 1, 0)))


def _leave_uncertain(tx: Tx, attempt: Attempt, message: Message, disposition: Disposition,
                     evidence: str) -> str:
    """An UNKNOWN outcome: the attempt UNKNOWN, its obligation still open, the message
    UNCERTAIN (never retried automatically)."""
    tx.put_attempt(msgspec.structs.replace(
        attempt, state=AttemptState.UNKNOWN, disposition=disposition, evidence=evidence,
    ))
    tx.put(
        keys.obligation_key(attempt.delay_message_id, attempt.attempt_id),
        encode_value(Obligation(
            attempt_id=attempt.attempt_id, lane=attempt.lane, key=message.key,
            state=AttemptState.UNKNOWN, since_position=attempt.admitted_position,
        )),
    )
    tx.save_message(message, tx.move_state(message, MessageState.UNCERTAIN))
    return "attempt UNKNOWN; message UNCERTAIN (obligation stays open)"


def settle(
    tx: Tx, attempt: Attempt, message: Message, outcome: Outcome, disposition: Disposition,
    evidence: str, settled_by: str,
) -> str:
    """Apply a settling outcome to an open attempt and its message; returns a summary."""
    if outcome == Outcome.UNKNOWN:
        return _leave_uncertain(tx, attempt, message, disposition, evidence)
    state = AttemptState.PUBLISHED if outcome == Outcome.PUBLISHED else AttemptState.NOT_PUBLISHED
    tx.put_attempt(msgspec.structs.replace(
        attempt, state=state, disposition=disposition, evidence=evidence,
        settled_position=tx.position, settled_by=settled_by,
    ))
    _close_obligation(tx, attempt)
    done = {"open_attempt_id": None}
    if outcome == Outcome.PUBLISHED:
        tx.save_message(message, tx.move_state(message, MessageState.PUBLISHED, **done))
        return "message PUBLISHED"
    if disposition == Disposition.PERMANENT:
        tx.save_message(message, tx.move_state(
            message, MessageState.FAILED, detail=f"permanent publish error: {evidence}", **done
        ))
        return "message FAILED (permanent)"
    lane = tx.lane(message.lane)
    if disposition == Disposition.LANE_UNAVAILABLE:
        # never reached the destination: bounded like a retriable failure, on its own count
        retries, unavailable = message.retries, message.unavailable + 1
        if unavailable >= lane.unavailable_max:
            tx.save_message(message, tx.move_state(
                message, MessageState.FAILED, unavailable=unavailable,
                detail=f"never reached the destination in {unavailable} attempts (lane "
                f"unavailable; unavailable_max {lane.unavailable_max}): {evidence}", **done,
            ))
            return "message FAILED (lane unavailable too often)"
        backoff = retry_backoff_ms(lane.retry_backoff_ms, unavailable)
    else:
        retries, unavailable = message.retries + 1, message.unavailable
        if retries >= lane.retry_max:
            tx.save_message(message, tx.move_state(
                message, MessageState.FAILED, retries=retries,
                detail=f"retries exhausted ({retries} of {lane.retry_max}): {evidence}", **done,
            ))
            return "message FAILED (retries exhausted)"
        backoff = retry_backoff_ms(lane.retry_backoff_ms, retries)
    # never before deliverAt less the lane's lead as it is now (it may have been lowered)
    action_at = max(max(message.action_at_ms, tx.broker_ms) + backoff,
                    message.deliver_at_ms - lane.handoff_lead_ms)
    retry = tx.move_state(
        message, MessageState.SCHEDULED, retries=retries, unavailable=unavailable,
        action_at_ms=action_at, **done
    )
    tx.save_message(message, tx.put_timeline(retry))
    return f"message back on the timeline at {action_at} ms (retry {retries})"


def outcome(tx: Tx, rec: PublishOutcome) -> Verdict:
    attempt = tx.attempt(rec.attempt_id)
    ids: Ids = {"delay_message_id": rec.delay_message_id, "attempt_id": rec.attempt_id}
    if attempt is None or attempt.delay_message_id != rec.delay_message_id:
        return rejected(Reason.ATTEMPT_NOT_FOUND, f"no attempt {rec.attempt_id} for this message",
                        **ids)
    if rec.outcome == Outcome.PUBLISHED and rec.disposition != Disposition.NONE:
        return rejected(Reason.INVALID_FIELD, "a PUBLISHED outcome has disposition NONE", **ids)
    if rec.outcome == Outcome.NOT_PUBLISHED and rec.disposition == Disposition.NONE:
        return rejected(Reason.INVALID_FIELD,
                        "a NOT_PUBLISHED outcome needs a disposition (RETRIABLE, PERMANENT, "
                        "LANE_UNAVAILABLE)", **ids)
    why = fenced(tx, rec.owner_id, rec.fencing_epoch)
    settled = attempt.state in (AttemptState.PUBLISHED, AttemptState.NOT_PUBLISHED)
    # a fenced owner's outcome is evidence only: PUBLISHED with destination evidence
    # settles an open attempt, anything else is kept on the attempt and changes nothing
    evidence_only = why is not None and not (
        rec.outcome == Outcome.PUBLISHED and rec.evidence.strip())
    late = settled or evidence_only or (
        attempt.state == AttemptState.UNKNOWN and rec.outcome != Outcome.PUBLISHED
    )
    if late:
        kept = LateOutcome(outcome=rec.outcome, disposition=rec.disposition,
                           evidence=rec.evidence, position=tx.position)
        tx.put_attempt(msgspec.structs.replace(
            attempt, late_outcomes=(*attempt.late_outcomes, kept)
        ))
        if evidence_only and not settled:
            return recorded(Reason.FENCED,
                            f"{rec.outcome} from a fenced owner is kept as evidence, not "
                            f"applied: {why}", **ids)
        if attempt.state == AttemptState.UNKNOWN:
            return recorded(Reason.UNKNOWN_NOT_DOWNGRADED,
                            f"{rec.outcome} for an UNKNOWN attempt is kept as evidence; only "
                            "PUBLISHED evidence or an operator settles it", **ids)
        return recorded(Reason.LATE_OUTCOME,
                        f"attempt already settled {attempt.state}; outcome kept, not applied",
                        **ids)
    message = tx.message(attempt.delay_message_id)
    assert message is not None, "an attempt always has its message"
    summary = settle(tx, attempt, message, rec.outcome, rec.disposition, rec.evidence, "OUTCOME")
    return applied(summary, generation=attempt.generation, delay_message_id=rec.delay_message_id,
                   attempt_id=rec.attempt_id)


def claim_result(tx: Tx, rec: ClaimResult) -> Verdict:
    failure = _check_time(tx, rec.decided_earliest_ms, rec.decided_latest_ms)
    if failure is not None:
        return failure
    message, failure = _check_work(tx, rec.delay_message_id, rec.generation, rec.work_digest)
    if message is None:
        assert failure is not None
        return failure
    ids: Ids = {"delay_message_id": rec.delay_message_id, "generation": rec.generation}
    why = fenced(tx, rec.owner_id, rec.fencing_epoch)
    if why is not None:
        return stale(Reason.FENCED, f"claim result refused: {why}", **ids)
    if rec.disposition == ClaimDisposition.EXPIRED:
        if admission_expire_at_ms(message) is None and message.expire_at_ms is not None:
            return stale(
                Reason.NOT_EXPIRED,
                f"this message was admitted before expireAt {message.expire_at_ms} "
                f"(attempt {message.attempts}): expireAt closes new admissions only, and its "
                "retries go on",
                **ids,
            )
        if message.expire_at_ms is None or rec.decided_earliest_ms <= message.expire_at_ms:
            return stale(
                Reason.NOT_EXPIRED,
                f"Trusted UTC earliest {rec.decided_earliest_ms} does not prove expireAt "
                f"{message.expire_at_ms} has passed",
                **ids,
            )
        ended = tx.move_state(tx.drop_timeline(message), MessageState.EXPIRED)
        tx.save_message(message, ended)
        return applied("message EXPIRED", **ids)
    ended = tx.move_state(
        tx.drop_timeline(message), MessageState.FAILED,
        detail=f"permanent pre-send error: {rec.detail}",
    )
    tx.save_message(message, ended)
    return applied("message FAILED (permanent pre-send error)", **ids)
