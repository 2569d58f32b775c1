"""Client Command handlers: SCHEDULE, CANCEL, RESCHEDULE, QUERY_BARRIER, PAYLOAD_*.

The cancellation boundary lives here: CANCEL and RESCHEDULE win only while the message
is SCHEDULED (no admitted attempt). Once an admission has won, the existing attempt must
be resolved instead of pretending it never started (seed 001, step 4).
"""

from __future__ import annotations

import msgspec

from nereus.machine.catch_up import retain_committed_stage
from nereus.machine.reasons import Reason
from nereus.machine.retention import retain_stage
from nereus.machine.tx import Tx
from nereus.machine.validate import check_headers, check_id, check_lane, check_times
from nereus.machine.verdict import Ids, Verdict, applied, rejected
from nereus.payload_objects import shard_of, shard_prefix
from nereus.records.client import (
    Cancel,
    PayloadCommit,
    PayloadReserve,
    QueryBarrier,
    Reschedule,
    Schedule,
)
from nereus.records.vocabulary import (
    ADMITTED_STATES,
    UNFINISHED_STATES,
    MessageState,
    ResultStatus,
)
from nereus.state import keys
from nereus.state.values import Identity, Message, PayloadStage, decode_value, encode_value
from nereus.timespec import format_duration_ms


def _not_scheduled(message: Message, action: str) -> Verdict:
    ids: Ids = {"delay_message_id": message.delay_message_id, "generation": message.generation}
    if message.state in ADMITTED_STATES:
        return rejected(
            Reason.ALREADY_ADMITTED,
            f"cannot {action}: attempt {message.open_attempt_id} was admitted and the message is "
            f"{message.state}; the attempt must be resolved instead",
            **ids,
        )
    return rejected(
        Reason.MESSAGE_TERMINAL, f"cannot {action}: the message is already {message.state}", **ids
    )


def action_at(tx: Tx, lane_name: str, deliver_at_ms: int,
              requested_ms: int | None) -> tuple[int, Verdict | None]:
    """The action time of new timeline work: deliverAt less the lane's replicated handoff
    lead when none is requested; a requested time earlier than that is REJECTED
    (deliverAt is a not-before boundary: only a destination that holds the message until
    deliverAt may be handed it earlier, and only by the lead its lane grants)."""
    lead = tx.lane(lane_name).handoff_lead_ms
    allowed = max(deliver_at_ms - lead, 0)
    if requested_ms is None:
        return allowed, None
    if requested_ms < allowed:
        return requested_ms, rejected(
            Reason.ACTION_BEFORE_DELIVER,
            f"action_at_ms {requested_ms} is {deliver_at_ms - requested_ms} ms before "
            f"deliver_at_ms {deliver_at_ms}; lane {lane_name} grants a handoff lead of {lead} ms",
        )
    return requested_ms, None


def within_limits(tx: Tx, lane_name: str, deliver_at_ms: int, ids: Ids, *,
                  new_message: bool) -> Verdict | None:
    """REJECTED when the lane's limits (its last LANE_LIMITS) refuse this work: deliverAt
    more than ``max_delay_ms`` after the record's broker time, or (a new message) the
    lane already holding ``max_pending`` unfinished messages."""
    limits = tx.lane_limits(lane_name)
    if limits is None:
        return None
    ahead_ms = deliver_at_ms - tx.broker_ms
    if limits.max_delay_ms and ahead_ms > limits.max_delay_ms:
        return rejected(
            Reason.MAX_DELAY_EXCEEDED,
            f"deliver_at is {format_duration_ms(ahead_ms)} after the record's broker time; "
            f"lane {lane_name} allows at most max_delay = "
            f"{format_duration_ms(limits.max_delay_ms)}",
            **ids,
        )
    if new_message and limits.max_pending:
        counts = tx.lane(lane_name).counts
        pending = sum(counts.get(state, 0) for state in UNFINISHED_STATES)
        if pending >= limits.max_pending:
            return rejected(
                Reason.LANE_FULL,
                f"lane {lane_name} holds {pending} unfinished messages, its max_pending is "
                f"{limits.max_pending}; retry once some have published",
                **ids,
            )
    return None


def _referenced_stage(tx: Tx, cmd: Schedule, ids: Ids) -> PayloadStage | Verdict:
    """The committed payload stage ``cmd.payload_ref`` names, free for this message, or
    why the SCHEDULE is REJECTED."""
    if cmd.payload:
        return rejected(Reason.INVALID_FIELD, "give payload or payload_ref, not both", **ids)
    assert cmd.payload_ref is not None
    raw = tx.get(keys.payload_key(cmd.payload_ref))
    stage = None if raw is None else decode_value(raw, PayloadStage)
    if stage is None or stage.state != "COMMITTED":
        return rejected(
            Reason.UNKNOWN_PAYLOAD, f"payload {cmd.payload_ref} is not committed", **ids
        )
    if stage.used_by is not None:
        return rejected(
            Reason.PAYLOAD_IN_USE,
            f"payload {cmd.payload_ref} is used by message {stage.used_by}; a committed "
            "payload belongs to one message (reserve and commit one for this message)",
            **ids,
        )
    return stage


def schedule(tx: Tx, cmd: Schedule) -> Verdict:
    limits = tx.limits
    failure = (  # the first failing check, each run only if the ones before it passed
        check_id(cmd.delay_message_id, "delay_message_id", limits)
        or check_lane(cmd.lane)
        or check_times(cmd.deliver_at_ms, cmd.action_at_ms, cmd.expire_at_ms)
        or check_headers(cmd.headers, limits)
    )
    if failure is not None:
        return failure
    ids: Ids = {"delay_message_id": cmd.delay_message_id}
    if len(cmd.payload) > limits.max_inline_payload_bytes:
        return rejected(
            Reason.PAYLOAD_TOO_LARGE,
            f"inline payload is {len(cmd.payload)} bytes; the limit is "
            f"{limits.max_inline_payload_bytes} (use --payload-file for the large-payload path)",
            **ids,
        )
    stage: PayloadStage | None = None
    if cmd.payload_ref is not None:  # the large-payload path (not the hot one)
        stage_or_refusal = _referenced_stage(tx, cmd, ids)
        if isinstance(stage_or_refusal, Verdict):
            return stage_or_refusal
        stage = stage_or_refusal
    message_id = cmd.delay_message_id
    message_key = keys.msg_key(message_id)
    raw = tx.get(message_key)
    if raw is not None:
        existing = decode_value(raw, Message)
        return rejected(
            Reason.MESSAGE_EXISTS,
            f"message {message_id} already exists ({existing.state}, scheduled by "
            f"command {existing.schedule_command_id})",
            **ids,
        )
    position, lane = tx.position, cmd.lane
    action_at_ms, failure = action_at(tx, lane, cmd.deliver_at_ms, cmd.action_at_ms)
    if failure is None:
        failure = within_limits(tx, lane, cmd.deliver_at_ms, ids, new_message=True)
    if failure is not None:
        return failure
    digest = tx.put_timeline_entry(lane, action_at_ms, message_id, 1, 0)
    message = Message(  # positional: see Message; fields in order
        message_id, lane, MessageState.SCHEDULED,
        1,  # generation
        cmd.deliver_at_ms, action_at_ms, cmd.expire_at_ms, cmd.key, cmd.headers, cmd.payload,
        cmd.payload_ref, digest,
        0, 0,  # retries, attempts
        None,  # open_attempt_id
        cmd.command_id,
        position, position,  # created_position, updated_position
    )
    tx.save_message(None, message, message_key)
    if stage is not None:  # the payload is this message's now: sweeping it removes the stage
        tx.put(keys.payload_key(stage.payload_id),
               encode_value(msgspec.structs.replace(stage, used_by=message_id)))
    return Verdict(status=ResultStatus.APPLIED, delay_message_id=message_id, generation=1)


def cancel(tx: Tx, cmd: Cancel) -> Verdict:
    message = tx.message(cmd.delay_message_id)
    if message is None:
        return rejected(
            Reason.MESSAGE_NOT_FOUND, f"no message {cmd.delay_message_id} on this shard",
            delay_message_id=cmd.delay_message_id,
        )
    if message.state != MessageState.SCHEDULED:
        return _not_scheduled(message, "cancel")
    cancelled = tx.move_state(tx.drop_timeline(message), MessageState.CANCELLED)
    tx.save_message(message, cancelled)
    return applied(delay_message_id=message.delay_message_id, generation=message.generation)


def reschedule(tx: Tx, cmd: Reschedule) -> Verdict:
    failure = check_times(cmd.deliver_at_ms, cmd.action_at_ms, cmd.expire_at_ms)
    if failure is not None:
        return failure
    message = tx.message(cmd.delay_message_id)
    if message is None:
        return rejected(
            Reason.MESSAGE_NOT_FOUND, f"no message {cmd.delay_message_id} on this shard",
            delay_message_id=cmd.delay_message_id,
        )
    if message.state != MessageState.SCHEDULED:
        return _not_scheduled(message, "reschedule")
    new_action_at, failure = action_at(tx, message.lane, cmd.deliver_at_ms, cmd.action_at_ms)
    if failure is None:
        failure = within_limits(tx, message.lane, cmd.deliver_at_ms, {
            "delay_message_id": message.delay_message_id, "generation": message.generation},
            new_message=False)
    if failure is not None:
        return failure
    moved = tx.move_state(
        tx.drop_timeline(message), MessageState.SCHEDULED,
        generation=message.generation + 1, deliver_at_ms=cmd.deliver_at_ms,
        action_at_ms=new_action_at, expire_at_ms=cmd.expire_at_ms, retries=0,
    )
    tx.save_message(message, tx.put_timeline(moved))
    return applied(delay_message_id=message.delay_message_id, generation=moved.generation)


def query_barrier(tx: Tx, cmd: QueryBarrier) -> Verdict:
    return applied(f"every record before position {tx.position} has an applied result")


def payload_reserve(tx: Tx, cmd: PayloadReserve) -> Verdict:
    failure = check_id(cmd.payload_id, "payload_id", tx.limits)
    if failure is not None:
        return failure
    if not 0 < cmd.size_bytes <= tx.limits.max_payload_bytes:
        return rejected(
            Reason.PAYLOAD_TOO_LARGE,
            f"size_bytes {cmd.size_bytes} is outside 1..{tx.limits.max_payload_bytes}",
        )
    if len(cmd.sha256) != 64 or not all(c in "0123456789abcdef" for c in cmd.sha256):
        return rejected(Reason.INVALID_FIELD, "sha256 must be 64 lowercase hex digits")
    key = keys.payload_key(cmd.payload_id)
    if tx.get(key) is not None:
        return rejected(Reason.PAYLOAD_EXISTS, f"payload {cmd.payload_id} is already reserved")
    stage = PayloadStage(
        payload_id=cmd.payload_id, state="RESERVED", size_bytes=cmd.size_bytes,
        sha256=cmd.sha256, expires_at_ms=cmd.expires_at_ms, object_key=None,
        position=tx.position,
    )
    tx.put(key, encode_value(stage))
    retain_stage(tx, cmd.payload_id, cmd.expires_at_ms)
    return applied(f"payload {cmd.payload_id} reserved")


def _foreign_object(tx: Tx, object_key: str) -> Verdict | None:
    """REJECTED when ``object_key`` is not under this shard's own payload prefix (what makes
    a shard's objects known by their keys: ``nereus.payload_objects``); a state with no
    identity (an in-memory shard of the tests) checks nothing."""
    raw = tx.get(keys.META_IDENTITY)
    if raw is None:
        return None
    identity = decode_value(raw, Identity)
    if shard_of(object_key) == (identity.route, identity.partition):
        return None
    prefix = shard_prefix(identity.route, identity.partition)
    return rejected(Reason.INVALID_FIELD,
                    f"object_key {object_key!r} is not under this shard's payload prefix "
                    f"{prefix!r}: a payload is uploaded to the shard of its message")


def payload_commit(tx: Tx, cmd: PayloadCommit) -> Verdict:
    foreign = _foreign_object(tx, cmd.object_key)
    if foreign is not None:
        return foreign
    key = keys.payload_key(cmd.payload_id)
    raw = tx.get(key)
    if raw is None:
        return rejected(Reason.UNKNOWN_PAYLOAD, f"payload {cmd.payload_id} was never reserved")
    stage = decode_value(raw, PayloadStage)
    if stage.state != "RESERVED":
        return rejected(Reason.PAYLOAD_EXISTS, f"payload {cmd.payload_id} is already {stage.state}")
    if tx.broker_ms > stage.expires_at_ms:
        return rejected(
            Reason.RESERVATION_EXPIRED,
            f"the reservation of {cmd.payload_id} expired at {stage.expires_at_ms} ms",
        )
    if (stage.size_bytes, stage.sha256) != (cmd.size_bytes, cmd.sha256):
        return rejected(
            Reason.PAYLOAD_MISMATCH,
            f"attested {cmd.size_bytes} bytes sha256 {cmd.sha256[:12]}.. but reserved "
            f"{stage.size_bytes} bytes sha256 {stage.sha256[:12]}..",
        )
    committed = PayloadStage(
        payload_id=stage.payload_id, state="COMMITTED", size_bytes=stage.size_bytes,
        sha256=stage.sha256, expires_at_ms=stage.expires_at_ms, object_key=cmd.object_key,
        position=tx.position,
    )
    tx.put(key, encode_value(committed))
    retain_committed_stage(tx, stage)
    return applied(f"payload {cmd.payload_id} committed")
