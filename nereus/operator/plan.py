"""Planning an operator mutation: fill in its precondition, dry-apply it, describe the change.

``plan_mutation`` does what the shard would do with the mutation if it were applied next,
without writing anything: it computes the precondition digest of the target as the view
has it (what the operator saw), builds the final record, looks up an earlier result under
the same idempotency key, and runs the real ``apply`` into a throw-away Overlay. The
writes that apply leaves are then described in operator terms — which lanes change and
how, how many messages move from which state to which, which attempts settle — so
``--dry-run`` shows exactly what a real run would change, because it is the same code.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from nereus.machine import apply, dedup_key, precondition_digest
from nereus.machine.limits import DEFAULT_LIMITS, Limits
from nereus.operator.intent import derive_idempotency_key
from nereus.records.codec import OperatorMutation, encode
from nereus.records.vocabulary import ResultStatus
from nereus.state import keys
from nereus.state.values import Attempt, Lane, Message, Result, decode_int, decode_value
from nereus.state.view import Overlay, StateView


@dataclass(frozen=True)
class MutationPlan:
    """A mutation ready to append, and what it would do if applied now."""

    record: OperatorMutation  # with its precondition digest filled in
    data: bytes  # the record's canonical bytes (what goes into the Shard Log)
    precondition_digest: str
    earlier: Result | None  # a result already stored under the same idempotency key
    would: Result  # what applying it next would leave
    impact: dict[str, Any] = field(default_factory=dict)


def next_position(view: StateView) -> int:
    """The position the next record would be applied at, as far as ``view`` knows."""
    raw = view.get(keys.META_APPLIED)
    return 0 if raw is None else decode_int(raw) + 1


def plan_mutation(
    view: StateView,
    mutation: OperatorMutation,
    *,
    shard: str,
    broker_ms: int,
    limits: Limits = DEFAULT_LIMITS,
    before: Sequence[bytes] = (),
) -> MutationPlan:
    """Plan ``mutation`` on ``shard`` against ``view`` (read-only; see the module docstring).

    A blank idempotency key is derived from the content (``derive_idempotency_key``),
    stepping past STALE results under earlier derivations.

    ``before`` are records submitted ahead of it in the same request (``mutate submit``
    with several mutations): they are dry-applied first, so the precondition is the
    state the mutation will really meet, not the one before its own siblings.
    """
    if before:
        ahead = Overlay(view)
        for data in before:
            ahead.merge(apply(ahead, data, position=next_position(ahead), broker_ms=broker_ms,
                              limits=limits).writes)
        view = ahead
    if not mutation.idempotency_key.strip():
        mutation = msgspec.structs.replace(
            mutation, idempotency_key=_derived_key(view, mutation, shard))
    digest = mutation.precondition_digest or precondition_digest(view, mutation)
    record = msgspec.structs.replace(mutation, precondition_digest=digest)
    data = encode(record)
    key = dedup_key(record)
    earlier_raw = None if key is None else view.get(keys.result_key(key))
    earlier = None if earlier_raw is None else decode_value(earlier_raw, Result)
    overlay = Overlay(view)
    applied = apply(overlay, data, position=next_position(view), broker_ms=broker_ms,
                    limits=limits)
    overlay.merge(applied.writes)
    impact = describe_writes(view, overlay.finish())
    return MutationPlan(record, data, digest, earlier, applied.result, impact)


def _derived_key(view: StateView, mutation: OperatorMutation, shard: str) -> str:
    key = derive_idempotency_key(mutation, shard)
    while True:
        dedup = dedup_key(msgspec.structs.replace(mutation, idempotency_key=key))
        raw = None if dedup is None else view.get(keys.result_key(dedup))
        if raw is None:
            return key
        earlier = decode_value(raw, Result)
        if earlier.status != ResultStatus.STALE:
            return key
        key = derive_idempotency_key(mutation, shard, after=earlier.position)


def describe_writes(view: StateView, writes: dict[bytes, bytes | None]) -> dict[str, Any]:
    """What ``writes`` would change, in operator terms (lanes, messages, attempts, pause)."""
    lanes: list[dict[str, Any]] = []
    transitions: Counter[str] = Counter()
    attempts: list[dict[str, Any]] = []
    paused: bool | None = None
    for key in sorted(writes):
        new = writes[key]
        old = view.get(key)
        if key.startswith(keys.LANE):
            change = _lane_change(old, new)
            if change["changed"]:  # counts alone move with every message: not news here
                lanes.append(change)
        elif key.startswith(keys.MSG):
            before = None if old is None else decode_value(old, Message).state.value
            after = None if new is None else decode_value(new, Message).state.value
            if before != after:
                transitions[f"{before or 'NONE'}->{after or 'NONE'}"] += 1
        elif key.startswith(keys.ATTEMPT):
            attempts.append(_attempt_change(old, new))
        elif key == keys.META_PAUSED:
            paused = new is not None
    impact: dict[str, Any] = {
        "lanes": lanes,
        "messages_changed": sum(transitions.values()),
        "message_transitions": dict(sorted(transitions.items())),
        "attempts": attempts,
    }
    if paused is not None:
        impact["paused"] = paused
    return impact


_POLICY = ("gate", "capacity", "quota", "retry_max", "retry_backoff_ms", "unavailable_max",
           "ordered", "handoff_lead_ms")


def _lane_change(old: bytes | None, new: bytes | None) -> dict[str, Any]:
    after = decode_value(new, Lane) if new is not None else None
    lane = after or decode_value(old or b"", Lane)
    # a lane the shard has not seen yet has the default policy (gate OPEN)
    before = decode_value(old, Lane) if old is not None else Lane(name=lane.name)
    changed = {
        name: {"from": _plain(getattr(before, name)), "to": _plain(getattr(after, name, None))}
        for name in _POLICY
        if getattr(before, name) != getattr(after, name, None)
    }
    return {
        "lane": lane.name,
        "changed": changed,
        "scheduled": lane.counts.get("SCHEDULED", 0),
        "in_flight": lane.open_attempts,
        "messages_by_state": dict(sorted(lane.counts.items())),
    }


def _attempt_change(old: bytes | None, new: bytes | None) -> dict[str, Any]:
    before = decode_value(old, Attempt) if old is not None else None
    after = decode_value(new, Attempt) if new is not None else None
    attempt = after or before
    assert attempt is not None
    return {
        "attempt_id": attempt.attempt_id,
        "delay_message_id": attempt.delay_message_id,
        "from": None if before is None else before.state.value,
        "to": None if after is None else after.state.value,
    }


def _plain(value: object) -> object:
    return getattr(value, "value", value)


def plan_document(plan: MutationPlan) -> dict[str, Any]:
    """A plan as JSON-ready data (what the admin API answers and the CLI reads back)."""
    return {
        "data": base64.b64encode(plan.data).decode(),
        "precondition_digest": plan.precondition_digest,
        "idempotency_key": plan.record.idempotency_key,
        "earlier": None if plan.earlier is None else msgspec.to_builtins(plan.earlier),
        "would": msgspec.to_builtins(plan.would),
        "impact": plan.impact,
    }
