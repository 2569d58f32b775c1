"""Appending planned mutations through the home's ``CommandSink`` (the engine, or straight
to the Shard Logs); a shard where the same command already applied gets its first result
as the receipt and nothing is appended."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from nereus.cli.context import Env
from nereus.cli.mutation.planning import Planned, ShardPlan
from nereus.cli.result_detail import readable_detail

if TYPE_CHECKING:
    from msgspec import UnsetType

    from nereus.cli.mutation.document import MutationDocument, MutationReceipt
    from nereus.client import Prepared, Receipt
    from nereus.state.values import Result

T = TypeVar("T")

def commit(env: Env, planned: Planned, *, wait: bool) -> MutationDocument:
    """Append what was planned (nothing for a shard where it already applied); the
    document with each shard's receipt."""
    import msgspec

    from nereus.cli.mutation.document import MutationDocument

    receipts = _append(env, planned.plans, wait=wait)
    return MutationDocument(**msgspec.structs.asdict(planned.head), receipts=receipts,
                            result=_overall(receipts))


def _append(env: Env, plans: Sequence[ShardPlan], *, wait: bool) -> list[MutationReceipt]:
    """Append what each shard still needs through the home's ``CommandSink`` (nothing where
    the same command was already applied: its first result is the receipt)."""
    receipts: list[MutationReceipt | None] = []
    pending: list[tuple[int, ShardPlan, Prepared]] = []
    for p in plans:
        if p.plan.earlier is not None:  # the same command already applied: no-op, same result
            receipts.append(_earlier(p, p.plan.earlier))
            continue
        receipts.append(None)
        pending.append((len(receipts) - 1, p, _prepared(p)))
    if pending:
        answers = env.command_sink(wait=wait).submit([item for _, _, item in pending],
                                                     wait=wait)
        for (index, p, _), answer in zip(pending, answers, strict=True):
            receipts[index] = _answered(p, answer)
    return [receipt for receipt in receipts if receipt is not None]


def _prepared(p: ShardPlan) -> Prepared:
    from nereus.client import Prepared
    from nereus.records import decode
    from nereus.records.codec import DecodeFailure, kind_of

    record = decode(p.plan.data)
    assert not isinstance(record, DecodeFailure), record  # we encoded it ourselves
    return Prepared(p.shard, kind_of(record), p.plan.idempotency_key, None, p.plan.data, record)


def _earlier(p: ShardPlan, earlier: Result) -> MutationReceipt:
    from nereus.cli.mutation.document import MutationReceipt

    return MutationReceipt(
        shard=str(p.shard), precondition_digest=p.plan.precondition_digest,
        idempotency_key=p.plan.idempotency_key, source_position=earlier.position,
        broker_time=None, evidence="APPLIED", result=earlier.status.value,
        reason=earlier.reason, detail=readable_detail(earlier.detail),
        duplicate_of=earlier.position)


def _answered(p: ShardPlan, answer: Receipt) -> MutationReceipt:
    """The sink's receipt: QUEUED (result, reason, detail and duplicate_of null) or APPLIED."""
    from nereus.cli.mutation.document import MutationReceipt

    return MutationReceipt(
        shard=str(p.shard), precondition_digest=p.plan.precondition_digest,
        idempotency_key=p.plan.idempotency_key, source_position=answer.source_position,
        broker_time=answer.broker_time, evidence=answer.evidence,
        result=_known(answer.result), reason=_known(answer.reason),
        detail=readable_detail(_known(answer.detail)), duplicate_of=_known(answer.duplicate_of))


def _known(value: T | UnsetType) -> T | None:
    """A receipt's result field: unset while QUEUED, which this document prints as null."""
    import msgspec

    return None if isinstance(value, msgspec.UnsetType) else value


def _overall(receipts: list[MutationReceipt]) -> str:
    results = {r.result for r in receipts}
    for verdict in ("STALE", "REJECTED"):
        if verdict in results:
            return verdict
    return "QUEUED" if None in results else "APPLIED"
