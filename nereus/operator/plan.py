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

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from nereus.machine import apply, dedup_key, precondition_digest
from nereus.machine.control import target_key
from nereus.operator.impact import Impact, describe_writes
from nereus.operator.intent import derive_idempotency_key
from nereus.records.codec import OperatorMutation, encode
from nereus.records.vocabulary import ResultStatus
from nereus.state import keys
from nereus.state.values import Result, decode_int, decode_value
from nereus.state.view import Overlay, StateView


@dataclass(frozen=True, slots=True, kw_only=True)
class MutationPlan:
    """A mutation ready to append, and what it would do if applied now."""

    record: OperatorMutation  # with its precondition digest filled in
    data: bytes  # the record's canonical bytes (what goes into the Shard Log)
    precondition_digest: str
    earlier: Result | None  # a result already stored under the same idempotency key
    would: Result  # what applying it next would leave
    impact: Impact


class PlanDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A plan as it travels (``POST /v1/mutations/plan`` answers it; the CLI reads it back,
    or builds it offline with ``plan_document``): ``data`` (base64 in JSON) is what to
    append, ``earlier`` the result already stored under the same idempotency key, ``would``
    what applying it next would leave."""

    data: bytes
    precondition_digest: str
    idempotency_key: str
    earlier: Result | None
    would: Result
    impact: Impact


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
    before: Sequence[bytes] = (),
) -> MutationPlan:
    """Plan ``mutation`` on ``shard`` against ``view`` (read-only; see the module docstring).

    A blank idempotency key is derived from the content (``derive_idempotency_key``),
    stepping past STALE results under earlier derivations, and past APPLIED ones whose
    change is no longer in place (``_derived_key``).

    ``before`` are records submitted ahead of it in the same request (``mutate submit``
    with several mutations): they are dry-applied first, so the precondition is the
    state the mutation will really meet, not the one before its own siblings.
    """
    if before:
        ahead = Overlay(view)
        for data in before:
            ahead.merge(apply(ahead, data, position=next_position(ahead),
                              broker_ms=broker_ms).writes)
        view = ahead
    if not mutation.idempotency_key.strip():
        mutation = msgspec.structs.replace(
            mutation, idempotency_key=_derived_key(view, mutation, shard,
                                                   broker_ms=broker_ms))
    digest = mutation.precondition_digest or precondition_digest(view, mutation)
    record = msgspec.structs.replace(mutation, precondition_digest=digest)
    data = encode(record)
    key = dedup_key(record)
    earlier_raw = None if key is None else view.get(keys.result_key(key))
    earlier = None if earlier_raw is None else decode_value(earlier_raw, Result)
    overlay = Overlay(view)
    applied = apply(overlay, data, position=next_position(view), broker_ms=broker_ms)
    overlay.merge(applied.writes)
    impact = describe_writes(view, overlay.finish())
    return MutationPlan(record=record, data=data, precondition_digest=digest, earlier=earlier,
                        would=applied.result, impact=impact)


def _derived_key(view: StateView, mutation: OperatorMutation, shard: str, *,
                 broker_ms: int) -> str:
    """The derived idempotency key (``derive_idempotency_key``) whose earlier result, if
    any, answers this command: a retry finds its first result. A key whose result is
    STALE (it changed nothing), or whose result was APPLIED but whose change is no longer
    in place (the same close after an open: applying the command now would change its
    target again), is stepped past: that is a new request, not a retry of the old one."""
    key = derive_idempotency_key(mutation, shard)
    while True:
        dedup = dedup_key(msgspec.structs.replace(mutation, idempotency_key=key))
        raw = None if dedup is None else view.get(keys.result_key(dedup))
        if raw is None:
            return key
        earlier = decode_value(raw, Result)
        if earlier.status != ResultStatus.STALE and not _would_change(view, mutation,
                                                                      broker_ms):
            return key
        key = derive_idempotency_key(mutation, shard, after=earlier.position)


def _would_change(view: StateView, mutation: OperatorMutation, broker_ms: int) -> bool:
    """Whether applying ``mutation`` now, as a request of its own, would change its target
    (the lane, the attempt, the message, the shard's pause or limits)."""
    probe = msgspec.structs.replace(mutation, idempotency_key="probe-" + "0" * 32,
                                    precondition_digest=None)
    overlay = Overlay(view)
    applied = apply(overlay, encode(probe), position=next_position(view), broker_ms=broker_ms)
    if applied.result.status != ResultStatus.APPLIED:
        return False
    overlay.merge(applied.writes)
    target = target_key(mutation)
    return overlay.finish().get(target, view.get(target)) != view.get(target)


def plan_document(plan: MutationPlan) -> PlanDocument:
    """A plan as it travels (what the admin API answers and the CLI reads back)."""
    return PlanDocument(data=plan.data, precondition_digest=plan.precondition_digest,
                        idempotency_key=plan.record.idempotency_key, earlier=plan.earlier,
                        would=plan.would, impact=plan.impact)
