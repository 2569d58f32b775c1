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
from nereus.machine.publishing import settle
from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx
from nereus.machine.validate import check_lane
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
    UNFINISHED_STATES,
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
    LaneLimit,
    ResultCatchUp,
    RetainCatchUp,
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
            return _lane_gate(tx, mutation)
        case LaneConfig():
            return _lane_config(tx, mutation)
        case LaneLimits():
            return _lane_limits(tx, mutation)
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


def _lane_gate(tx: Tx, mutation: LaneGate) -> Verdict:
    failure = check_lane(mutation.lane)
    if failure is not None:
        return failure
    lane = tx.lane(mutation.lane)
    if lane.gate == mutation.gate:
        return applied(f"lane {lane.name} admissionGate was already {lane.gate}")
    tx.put_lane(msgspec.structs.replace(lane, gate=mutation.gate, gate_position=tx.position))
    return applied(f"lane {lane.name} admissionGate {lane.gate} -> {mutation.gate}")


def _lane_config(tx: Tx, mutation: LaneConfig) -> Verdict:
    failure = check_lane(mutation.lane)
    if failure is not None:
        return failure
    bounds = {"capacity": 1, "quota": 1, "retry_max": 1, "retry_backoff_ms": 0,
              "handoff_lead_ms": 0, "unavailable_max": 1}
    changes: dict[str, object] = {}
    for field, minimum in bounds.items():
        value = getattr(mutation, field)
        if value is not None:
            if value < minimum:
                return rejected(Reason.INVALID_FIELD, f"{field} must be at least {minimum}")
            changes[field] = value
    if mutation.ordered is not None:
        changes["ordered"] = mutation.ordered
    if not changes:
        return rejected(Reason.INVALID_FIELD, "LANE_CONFIG changes nothing")
    lane = tx.lane(mutation.lane)
    lead = mutation.handoff_lead_ms
    scheduled = lane.counts.get(MessageState.SCHEDULED, 0)
    if lead is not None and lead < lane.handoff_lead_ms and scheduled:
        return rejected(
            Reason.LEAD_IN_USE,
            f"lane {lane.name} has {scheduled} SCHEDULED messages whose actionAt may rely on "
            f"its handoff lead of {lane.handoff_lead_ms} ms; lowering it to {lead} ms could "
            "publish them before deliverAt. Let them publish (or cancel/reschedule them) first",
        )
    pending = sum(lane.counts.get(state, 0) for state in UNFINISHED_STATES)
    if mutation.ordered is not None and mutation.ordered != lane.ordered and pending:
        was = "with" if lane.ordered else "without"
        return rejected(
            Reason.ORDERING_IN_USE,
            f"lane {lane.name} has {pending} unfinished messages placed and scheduled {was} "
            f"per-key order; making it {'ORDERED' if mutation.ordered else 'unordered'} now "
            "could not keep their order or placement. Let them finish first",
        )
    listed = ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))
    if all(getattr(lane, field) == value for field, value in changes.items()):
        return applied(f"lane {lane.name} config was already {listed} (revision "
                       f"{lane.config_revision})")
    tx.put_lane(msgspec.structs.replace(
        lane, config_revision=lane.config_revision + 1, **changes
    ))
    return applied(f"lane {lane.name} config revision {lane.config_revision + 1}: {listed}")


def _lane_limits(tx: Tx, mutation: LaneLimits) -> Verdict:
    failure = check_lane(mutation.lane)
    if failure is not None:
        return failure
    for field in ("max_delay_ms", "max_pending", "retention_ms", "dedup_window_ms"):
        value = getattr(mutation, field)
        if isinstance(value, int) and value < 0:
            return rejected(Reason.INVALID_FIELD, f"{field} must be 0 (no limit) or more")
    before = tx.lane_limits(mutation.lane)
    # retention fields left UNSET keep what was replicated (a LANE_LIMITS from before them)
    retention_ms = mutation.retention_ms if before is None or isinstance(
        mutation.retention_ms, int) else before.retention_ms
    dedup_window_ms = mutation.dedup_window_ms if before is None or isinstance(
        mutation.dedup_window_ms, int) else before.dedup_window_ms
    kept_since, later = _kept_catch_up(tx, mutation, before, retention_ms, dedup_window_ms)
    limits = LaneLimit(lane=mutation.lane, max_delay_ms=mutation.max_delay_ms,
                       max_pending=mutation.max_pending, position=tx.position,
                       retention_ms=retention_ms, dedup_window_ms=dedup_window_ms,
                       catch_up=_catch_up(tx, mutation, before, retention_ms, dedup_window_ms),
                       kept_since=kept_since, later_catch_ups=later)
    if before is not None and _limit_values(before) == _limit_values(limits):
        return applied(f"lane {mutation.lane} limits were already {_limits_text(limits)}")
    tx.put(keys.lane_limits_key(mutation.lane), encode_value(limits))
    return applied(f"lane {mutation.lane} limits: {_limits_text(limits)}")


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


def _catch_up(tx: Tx, mutation: LaneLimits, before: LaneLimit | None,
              retention_ms: int | msgspec.UnsetType,
              dedup_window_ms: int | msgspec.UnsetType) -> RetainCatchUp | msgspec.UnsetType:
    """The lane's catch-up: kept once set; set by a LANE_LIMITS asking for it (``catch_up``)
    that is the first to give the lane a retention — before it no message of the lane ever
    had a ``retain`` entry (a retention, once replicated, is never UNSET again)."""
    if before is not None and isinstance(before.catch_up, RetainCatchUp):
        return before.catch_up
    first = before is None or not isinstance(before.retention_ms, int)
    if mutation.catch_up is not True or not first or not isinstance(retention_ms, int) \
            or not retention_ms:
        return msgspec.UNSET
    window = dedup_window_ms if isinstance(dedup_window_ms, int) else 0
    return RetainCatchUp(before_position=tx.position,
                         expire_at_ms=keys.expire_at(tx.broker_ms, retention_ms),
                         result_until_ms=keys.expire_at(tx.broker_ms, window) if window else 0)


# a lane's ``kept_since`` and ``later_catch_ups``
_KeptCatchUps = tuple[int | msgspec.UnsetType, tuple[RetainCatchUp, ...] | msgspec.UnsetType]


def _kept_catch_up(tx: Tx, mutation: LaneLimits, before: LaneLimit | None,
                   retention_ms: int | msgspec.UnsetType,
                   dedup_window_ms: int | msgspec.UnsetType) -> _KeptCatchUps:
    """The lane's ``kept_since`` and ``later_catch_ups`` after this record.

    Only a record asking for it (``catch_up_kept``) changes them: one that makes the
    retention 0 (kept) records where (0 when it had none before: every message so far was
    kept too); one that gives a retention back after it was 0 adds a catch-up for the
    messages that ended from then to now (from where the last LANE_LIMITS was applied when
    the 0 came from a record that did not say where: later messages only, never one that
    has an entry of its own)."""
    kept_since = msgspec.UNSET if before is None else before.kept_since
    later = msgspec.UNSET if before is None else before.later_catch_ups
    if mutation.catch_up_kept is not True or not isinstance(retention_ms, int):
        return kept_since, later
    was = msgspec.UNSET if before is None else before.retention_ms
    if retention_ms == 0:
        if was != 0:  # kept from here (and everything before, when it had no retention)
            kept_since = tx.position if isinstance(was, int) else 0
        return kept_since, later
    if was != 0 or before is None:
        return kept_since, later
    after = kept_since if isinstance(kept_since, int) else before.position
    window = dedup_window_ms if isinstance(dedup_window_ms, int) else 0
    given_back = RetainCatchUp(
        before_position=tx.position, expire_at_ms=keys.expire_at(tx.broker_ms, retention_ms),
        result_until_ms=keys.expire_at(tx.broker_ms, window) if window else 0,
        after_position=after)
    return msgspec.UNSET, (*(later if isinstance(later, tuple) else ()), given_back)


def _limit_values(limits: LaneLimit) -> tuple[object, ...]:
    return (limits.max_delay_ms, limits.max_pending, limits.retention_ms,
            limits.dedup_window_ms)


def _limits_text(limits: LaneLimit) -> str:
    text = (f"max_delay_ms={limits.max_delay_ms or 'none'}, "
            f"max_pending={limits.max_pending or 'none'}")
    for name in ("retention_ms", "dedup_window_ms"):
        value = getattr(limits, name)
        if isinstance(value, int):
            text += f", {name}={value or 'kept'}"
    return text


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
