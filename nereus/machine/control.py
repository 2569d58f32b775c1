"""Operator Mutation handlers and the engine's control records (barriers, marks).

Operator mutations are checked for identity, reason and idempotency key before anything
else (``check_operator``), then for the precondition digest: the digest of the target
state the operator saw when planning the change. If the target changed since, the
mutation is STALE rather than applied to a state nobody looked at.
"""

from __future__ import annotations

import hashlib

import msgspec

from nereus.machine.fencing import barrier_fenced, fenced
from nereus.machine.lane_mutations import lane_config, lane_gate, lane_limits
from nereus.machine.publishing import settle
from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx
from nereus.machine.verdict import Ids, Verdict, applied, recorded, rejected, stale
from nereus.records.codec import OperatorMutation, kind_of
from nereus.records.operator import (
    AttemptResolve,
    LaneConfig,
    LaneGate,
    LaneLimits,
    MessageBreak,
    ShardLimits,
    ShardPause,
    ShardResume,
    ShardRetention,
)
from nereus.records.system import ActivationBarrier, CheckpointMark, RouteIdentity
from nereus.records.vocabulary import (
    ADMITTED_STATES,
    AttemptState,
    Disposition,
    MessageState,
    Outcome,
    Resolution,
)
from nereus.state import keys
from nereus.state.values import (
    Activation,
    CheckpointMarkValue,
    Lane,
    ResultCatchUp,
    ShardRetentionValue,
    StageCatchUp,
    decode_value,
    encode_value,
)
from nereus.state.view import StateView


def target_key(mutation: OperatorMutation) -> bytes:
    """The state key an operator mutation acts on (what its precondition digest covers)."""
    match mutation:
        case LaneGate(lane=lane) | LaneConfig(lane=lane):
            return keys.lane_key(lane)
        case LaneLimits(lane=lane):
            return keys.lane_limits_key(lane)
        case AttemptResolve(attempt_id=attempt_id):
            return keys.attempt_key(attempt_id)
        case MessageBreak(delay_message_id=delay_message_id):
            return keys.msg_key(delay_message_id)
        case ShardPause() | ShardResume():
            return keys.META_PAUSED
        case ShardRetention():
            return keys.META_SHARD_RETENTION
        case ShardLimits():
            return keys.META_SHARD_LIMITS
    raise AssertionError(f"no target for {mutation!r}")  # pragma: no cover


def precondition_digest(view: StateView, mutation: OperatorMutation) -> str:
    """Digest of the target state as ``view`` has it; operators send what they saw.

    For a lane it covers the lane's policy (gate, gate position, capacity, quota, retry
    policy, ordering, config revision) and not its counters: every SCHEDULE moves those,
    and a lane closed during an incident must not come back STALE because traffic kept
    flowing while the operator typed the reason.
    """
    key = target_key(mutation)
    value = view.get(key) or b""
    if value and isinstance(mutation, LaneGate | LaneConfig):
        lane = decode_value(value, Lane)
        value = encode_value(msgspec.structs.replace(lane, counts={}, open_attempts=0,
                                                     admissions=0, quota_tokens_milli=0,
                                                     quota_at_ms=None, last_decided_ms=0))
    return hashlib.sha256(key + b"\x00" + value).hexdigest()[:32]


def check_operator(mutation: OperatorMutation) -> Verdict | None:
    """REJECTED when who, why or the idempotency key is missing."""
    if not mutation.operator.strip():
        return rejected(Reason.MISSING_OPERATOR, "operator mutations need an operator identity")
    if not mutation.reason.strip():
        return rejected(Reason.MISSING_REASON, "operator mutations need a reason")
    if not mutation.idempotency_key.strip():
        return rejected(Reason.MISSING_IDEMPOTENCY_KEY,
                        "operator mutations need an idempotency key")
    return None


def engine_fenced(tx: Tx, mutation: OperatorMutation) -> Verdict | None:
    """An engine's mutation (one naming its owner and epoch) from an owner that is not the
    live one is STALE ``FENCED``, like any System Mutation: a replaced owner's view of
    the configuration no longer speaks for the shard. An operator's own names neither."""
    owner, epoch = mutation.owner_id, mutation.fencing_epoch
    if owner is msgspec.UNSET and epoch is msgspec.UNSET:
        return None
    if owner is msgspec.UNSET or epoch is msgspec.UNSET:
        return rejected(Reason.INVALID_FIELD,
                        "owner_id and fencing_epoch go together: an engine's mutation names "
                        "both, an operator's neither")
    why = fenced(tx, owner, epoch)
    if why is None:
        return None
    return stale(Reason.FENCED, f"{kind_of(mutation)} of engine {owner} refused: {why}")


def operator_mutation(tx: Tx, mutation: OperatorMutation) -> Verdict:
    failure = engine_fenced(tx, mutation)
    if failure is not None:
        return failure
    if mutation.precondition_digest is not None:
        current = precondition_digest(tx, mutation)
        if current != mutation.precondition_digest:
            return stale(
                Reason.PRECONDITION_STALE,
                f"the target changed since it was planned (saw {mutation.precondition_digest}, "
                f"now {current}); look again and re-plan",
            )
    match mutation:
        case LaneGate():
            return lane_gate(tx, mutation)
        case LaneConfig():
            return lane_config(tx, mutation)
        case LaneLimits():
            return lane_limits(tx, mutation)
        case AttemptResolve():
            return _attempt_resolve(tx, mutation)
        case MessageBreak():
            return _message_break(tx, mutation)
        case ShardPause():
            if tx.paused():
                return applied("the shard was already paused")
            tx.put(keys.META_PAUSED, encode_value({
                "operator": mutation.operator, "reason": mutation.reason, "position": tx.position,
            }))
            return applied("shard paused: no new Publish Admission")
        case ShardResume():
            if not tx.paused():
                return applied("the shard was not paused")
            tx.delete(keys.META_PAUSED)
            return applied("shard resumed")
        case ShardRetention():
            return _shard_retention(tx, mutation)
        case ShardLimits():
            return _shard_limits(tx, mutation)
    raise AssertionError(f"unhandled {mutation!r}")  # pragma: no cover


def _shard_limits(tx: Tx, mutation: ShardLimits) -> Verdict:
    """The shard's limits from the next record on (``nereus.records.limits``)."""
    was = tx.get(keys.META_SHARD_LIMITS)
    value = encode_value(mutation.limits)
    if was == value:
        return applied("the shard's limits were already these")
    tx.put(keys.META_SHARD_LIMITS, value)
    listed = ", ".join(f"{name}={number}" for name, number in
                       msgspec.structs.asdict(mutation.limits).items())
    return applied(f"shard limits: {listed}")


def _shard_retention(tx: Tx, mutation: ShardRetention) -> Verdict:
    if mutation.dedup_window_ms < 0:
        return rejected(Reason.INVALID_FIELD, "dedup_window_ms must be 0 (kept) or more")
    raw = tx.get(keys.META_SHARD_RETENTION)
    before = None if raw is None else decode_value(raw, ShardRetentionValue)
    window = mutation.dedup_window_ms
    text = f"{window} ms" if window else "kept for ever"
    if before is not None and before.dedup_window_ms == window:
        return applied(f"the shard's dedup window was already {text}")
    catch_up = msgspec.UNSET if before is None else before.stage_catch_up
    results = msgspec.UNSET if before is None else before.result_catch_ups
    if window and (before is None or not before.dedup_window_ms):
        # given a window it had not: what was written meanwhile may have no entry
        if mutation.catch_up is True:
            catch_up = StageCatchUp(before_position=tx.position, window_ms=window)
        if mutation.catch_up_results is True:
            results = (*(() if before is None else before.catch_ups()), ResultCatchUp(
                after_position=0 if before is None else before.kept_from(),
                before_position=tx.position, expire_at_ms=keys.expire_at(tx.broker_ms, window)))
    kept_since: int | msgspec.UnsetType = msgspec.UNSET
    if not window and mutation.catch_up_results is True:
        kept_since = 0 if before is None else tx.position  # none before: from the start
    tx.put(keys.META_SHARD_RETENTION, encode_value(ShardRetentionValue(
        dedup_window_ms=window, position=tx.position, stage_catch_up=catch_up,
        result_catch_ups=results, kept_since=kept_since)))
    return applied(f"the shard's dedup window: {text} (results of records without a lane "
                   "window, and rejects)")


def _attempt_resolve(tx: Tx, mutation: AttemptResolve) -> Verdict:
    ids: Ids = {"attempt_id": mutation.attempt_id}
    if not mutation.evidence.strip():
        return rejected(Reason.MISSING_EVIDENCE, "resolving an attempt needs evidence", **ids)
    attempt = tx.attempt(mutation.attempt_id)
    if attempt is None:
        return rejected(Reason.ATTEMPT_NOT_FOUND, f"no attempt {mutation.attempt_id}", **ids)
    if attempt.state != AttemptState.UNKNOWN:
        return rejected(
            Reason.ATTEMPT_NOT_UNKNOWN,
            f"attempt is {attempt.state}; only UNKNOWN attempts are resolved by an operator "
            "(a PUBLISHING one may still have a live producer call)",
            **ids,
        )
    message = tx.message(attempt.delay_message_id)
    assert message is not None, "an attempt always has its message"
    if mutation.resolution == Resolution.PUBLISHED:
        outcome, disposition = Outcome.PUBLISHED, Disposition.NONE
    else:
        outcome, disposition = Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE
    checked = "verified" if mutation.verified else "unverified"
    evidence = f"operator {mutation.operator} ({checked}): {mutation.evidence}"
    summary = settle(tx, attempt, message, outcome, disposition, evidence,
                     f"OPERATOR:{mutation.operator}")
    return applied(summary, delay_message_id=attempt.delay_message_id,
                   generation=attempt.generation, attempt_id=attempt.attempt_id)


def _message_break(tx: Tx, mutation: MessageBreak) -> Verdict:
    ids: Ids = {"delay_message_id": mutation.delay_message_id}
    message = tx.message(mutation.delay_message_id)
    if message is None:
        return rejected(Reason.MESSAGE_NOT_FOUND, f"no message {mutation.delay_message_id}", **ids)
    if message.state in ADMITTED_STATES:
        return rejected(
            Reason.ATTEMPT_OPEN,
            f"message is {message.state} with attempt {message.open_attempt_id}; resolve the "
            "attempt first",
            **ids,
        )
    if message.state != MessageState.SCHEDULED:
        return rejected(Reason.MESSAGE_TERMINAL, f"message is already {message.state}", **ids)
    broken = tx.move_state(
        tx.drop_timeline(message), MessageState.FAILED,
        detail=f"BROKEN by {mutation.operator}: {mutation.reason}",
    )
    tx.save_message(message, broken)
    return applied("message FAILED (broken by operator)", generation=message.generation,
                   delay_message_id=message.delay_message_id)


def activation_barrier(tx: Tx, rec: ActivationBarrier) -> Verdict:
    why = barrier_fenced(tx, rec.owner_id, rec.fencing_epoch)
    if why is not None:
        return stale(Reason.FENCED, f"activation refused: {why}")
    tx.put(keys.META_ACTIVATION, encode_value(Activation(
        barrier_id=rec.barrier_id, owner_id=rec.owner_id, fencing_epoch=rec.fencing_epoch,
        position=tx.position,
    )))
    return applied(f"owner {rec.owner_id} active at epoch {rec.fencing_epoch}")


def route_identity(tx: Tx, rec: RouteIdentity) -> Verdict:
    """The first identity stays: a different one later in the log is REJECTED (the engine
    and the client refuse to append to, or start on, a log of another identity anyway)."""
    raw = tx.get(keys.META_ROUTE)
    if raw is not None:
        first = decode_value(raw, RouteIdentity)
        if first != rec:
            return rejected(
                Reason.ROUTE_MISMATCH,
                f"this shard is route {first.route} id {first.route_id or '-'} partition "
                f"{first.partition} of {first.partitions}, not {rec.route} id "
                f"{rec.route_id or '-'} partition {rec.partition} of {rec.partitions}",
            )
        return applied("the same route identity again")
    tx.put(keys.META_ROUTE, encode_value(rec))
    return applied(f"route {rec.route} id {rec.route_id or '-'} partition {rec.partition} of "
                   f"{rec.partitions}")


def checkpoint_mark(tx: Tx, rec: CheckpointMark) -> Verdict:
    why = fenced(tx, rec.owner_id, rec.fencing_epoch)
    if why is not None:  # an offline tool's checkpoint, or a fenced owner's: audit only
        return recorded(Reason.FENCED, f"checkpoint {rec.checkpoint_id} kept for the audit "
                        f"trail, not the shard's mark: {why}")
    tx.put(keys.META_CHECKPOINT_MARK, encode_value(CheckpointMarkValue(
        checkpoint_id=rec.checkpoint_id, position=tx.position,
    )))
    return applied(f"checkpoint {rec.checkpoint_id} marked")
