"""Planning an operator mutation: on every target shard, against the state it will meet
(through the engine, or the database with the log's unapplied records on top); the
document that says what would change."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nereus.cli.context import Env
from nereus.cli.mutation.options import Identity

if TYPE_CHECKING:
    from nereus.records.codec import OperatorMutation
    from nereus.shard import ShardId


Build = Callable[["ShardId"], "OperatorMutation"]


def every_shard(env: Env, only: Sequence[str] | None = None) -> list[ShardId]:
    """The shards a lane mutation goes to: all of them, or the ``--shard`` ones."""
    from nereus.shard import ShardId

    if only:
        return [env.shard(text) for text in only]
    return [ShardId(route.name, partition) for route in env.config.routes.values()
            for partition in range(route.partitions)]


@dataclass


class Planned:
    """One mutation planned on its shards: the document to print and the plans to append."""

    doc: dict[str, Any]
    plans: list[tuple[ShardId, dict[str, Any]]]
    destructive: bool
    running: bool


def plan(env: Env, *, build: Build, shards: Sequence[ShardId], who: Identity,
         dry_run: bool, wait: bool, ahead: Sequence[Planned] = ()) -> Planned:
    """Plan the mutation on every shard; with ``dry_run`` the document says what would be.

    ``ahead``: mutations of the same submission that go first; each shard's plan starts
    from the state they leave (see ``nereus.operator.plan_mutation``).
    """
    import msgspec

    from nereus.errors import EngineUnreachable
    from nereus.operator import is_destructive, mutation_target

    running = env.engine_running()
    if wait and not dry_run and not running:
        raise EngineUnreachable(
            f"--wait needs the engine, and none runs on {env.home}",
            hint="start it with `nereus engine start`, or drop --wait for the QUEUED receipt")
    plans: list[tuple[ShardId, dict[str, Any]]] = []
    first: OperatorMutation | None = None
    for shard in shards:
        # a blank key is derived by the planner, which sees earlier results
        mutation = msgspec.structs.replace(build(shard), idempotency_key=who.idempotency_key or "")
        first = first or mutation
        before = [p["data"] for item in ahead for s, p in item.plans
                  if s == shard and p["earlier"] is None]
        plans.append((shard, _plan(env, shard, mutation, running, before)))
    assert first is not None
    doc: dict[str, Any] = {
        "kind": _kind(first), "target": mutation_target(first), "operator": who.operator,
        "operator_reason": who.reason,
        "idempotency_key": plans[0][1]["idempotency_key"] if len(plans) == 1 else None,
        "dry_run": dry_run, "impact": _total_impact(plans), "receipts": [],
    }
    if dry_run:
        doc["receipts"] = [_would(shard, p) for shard, p in plans]
        doc["result"] = "DRY_RUN"
    return Planned(doc, plans, is_destructive(first), running)


def _kind(mutation: OperatorMutation) -> str:
    from nereus.records.codec import kind_of

    return kind_of(mutation)


def _plan(env: Env, shard: ShardId, mutation: OperatorMutation, running: bool,
          before: list[str]) -> dict[str, Any]:
    from nereus.records import encode

    if running:
        answer: dict[str, Any] = env.admin().post("/v1/mutations/plan", {
            "shard": str(shard), "data": base64.b64encode(encode(mutation)).decode(),
            "before": before})
        return answer
    from nereus.operator import plan_mutation
    from nereus.operator.plan import next_position, plan_document
    from nereus.state.store import ShardStore
    from nereus.state.view import EmptyView

    path = env.layout.shard_state(shard)
    now_ms = int(time.time() * 1000)
    ahead = [base64.b64decode(data) for data in before]
    if not (path / "CURRENT").exists():  # never applied anything yet
        tail = _unapplied(env, shard, 0)
        plan = plan_mutation(EmptyView(), mutation, shard=str(shard), broker_ms=now_ms,
                             limits=env.config.limits, before=tail + ahead)
        return plan_document(plan)
    with ShardStore.open(path, read_only=True) as store:
        tail = _unapplied(env, shard, next_position(store))
        plan = plan_mutation(store, mutation, shard=str(shard), broker_ms=now_ms,
                             limits=env.config.limits, before=tail + ahead)
        return plan_document(plan)


def _unapplied(env: Env, shard: ShardId, position: int) -> list[bytes]:
    """Records the log holds past the database's applied position (the engine is down).

    The mutation will be applied after them, so it is planned against the state they
    leave: a message scheduled a moment ago and not yet applied is there to break.
    """
    from nereus.errors import NotFound

    try:
        log = env.shard_log(shard, create=False)
    except NotFound:
        return []
    out: list[bytes] = []
    while True:
        records = log.read(position, 10_000)
        if not records:
            return out
        out += [record.payload for record in records]
        position = records[-1].position + 1


def _total_impact(plans: list[tuple[ShardId, dict[str, Any]]]) -> dict[str, Any]:
    """The shards' impacts added up: lanes per shard, message transitions summed."""
    transitions: dict[str, int] = {}
    lanes: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    paused: list[str] = []
    for shard, plan in plans:
        impact = plan["impact"]
        for name, count in impact["message_transitions"].items():
            transitions[name] = transitions.get(name, 0) + count
        lanes += [{"shard": str(shard), **lane} for lane in impact["lanes"]]
        attempts += [{"shard": str(shard), **a} for a in impact["attempts"]]
        if "paused" in impact:
            paused.append(f"{shard}: {'paused' if impact['paused'] else 'resumed'}")
    total: dict[str, Any] = {
        "shards": len(plans),
        "messages_changed": sum(transitions.values()),
        "message_transitions": dict(sorted(transitions.items())),
        "messages_held": sum(lane["scheduled"] for lane in lanes
                             if lane["changed"].get("gate", {}).get("to") == "CLOSED"),
        "lanes": lanes,
        "attempts": attempts,
    }
    if paused:
        total["shard_pause"] = paused
    return total


def _would(shard: ShardId, plan: dict[str, Any]) -> dict[str, Any]:
    would, earlier = plan["would"], plan["earlier"]
    receipt = {
        "shard": str(shard), "source_position": None, "broker_time": None,
        "evidence": "DRY_RUN", "precondition_digest": plan["precondition_digest"],
        "idempotency_key": plan["idempotency_key"],
        "would_result": earlier["status"] if earlier else would["status"],
        "would_reason": (earlier or would)["reason"],
        "would_detail": (earlier or would)["detail"],
        "duplicate_of": earlier["position"] if earlier else None,
    }
    return receipt
