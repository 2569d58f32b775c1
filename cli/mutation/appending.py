"""Appending planned mutations through the home's ``CommandSink`` (the engine, or straight
to the Shard Logs); a shard where the same command already applied gets its first result
as the receipt and nothing is appended."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from nereus.cli.context import Env
from nereus.cli.mutation.planning import Planned

if TYPE_CHECKING:
    from nereus.shard import ShardId


def commit(env: Env, planned: Planned, *, wait: bool) -> None:
    """Append what was planned (nothing for a shard where it already applied)."""
    doc = planned.doc
    doc["receipts"] = _append(env, planned.plans, wait=wait)
    doc["result"] = _overall(doc["receipts"])


def _append(env: Env, plans: list[tuple[ShardId, dict[str, Any]]], *,
            wait: bool) -> list[dict[str, Any]]:
    """Append what each shard still needs through the home's ``CommandSink`` (nothing where
    the same command was already applied: its first result is the receipt)."""
    from nereus.client import Prepared
    from nereus.records import decode
    from nereus.records.codec import DecodeFailure, kind_of

    receipts: list[dict[str, Any]] = []
    pending: list[tuple[int, Prepared]] = []
    for shard, plan in plans:
        earlier = plan["earlier"]
        base = {"shard": str(shard), "precondition_digest": plan["precondition_digest"],
                "idempotency_key": plan["idempotency_key"]}
        if earlier is not None:  # the same command already applied: no-op, same result
            receipts.append({**base, "source_position": earlier["position"],
                             "broker_time": None, "evidence": "APPLIED",
                             **_result_fields(earlier), "duplicate_of": earlier["position"]})
            continue
        receipts.append(base)
        data = base64.b64decode(plan["data"])
        record = decode(data)
        assert not isinstance(record, DecodeFailure), record  # we encoded it ourselves
        pending.append((len(receipts) - 1, Prepared(shard, kind_of(record),
                                                    plan["idempotency_key"], None, data,
                                                    record)))
    if not pending:
        return receipts
    answers = env.command_sink(wait=wait).submit([p for _, p in pending], wait=wait)
    for (index, _), answer in zip(pending, answers, strict=True):
        receipts[index].update({
            "source_position": answer.source_position, "broker_time": answer.broker_time,
            "evidence": answer.evidence, "result": answer.result, "reason": answer.reason,
            "detail": answer.detail, "duplicate_of": answer.duplicate_of})
    return receipts


def _result_fields(result: dict[str, Any]) -> dict[str, Any]:
    return {"result": result["status"], "reason": result["reason"], "detail": result["detail"]}


def _overall(receipts: list[dict[str, Any]]) -> str:
    results = {r.get("result") for r in receipts}
    for verdict in ("STALE", "REJECTED"):
        if verdict in results:
            return verdict
    return "QUEUED" if None in results else "APPLIED"
