"""Planning an operator mutation: on every target shard, against the state it will meet
(through the engine, or the database with the log's unapplied records on top); the
head of the document that says what would change (``nereus.cli.mutation.document``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nereus.cli.context import Env
from nereus.cli.mutation.options import Identity
from nereus.cli.result_detail import readable_detail

if TYPE_CHECKING:
    from nereus.cli.mutation.document import (
        DryRunReceipt,
        LaneImpact,
        MutationDryRun,
        MutationHead,
        MutationImpact,
    )
    from nereus.operator.plan import PlanDocument
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


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """The mutation planned on one shard."""

    shard: ShardId
    plan: PlanDocument

    @property
    def to_append(self) -> bool:
        """False when the same command already applied here (nothing to append)."""
        return self.plan.earlier is None


@dataclass(frozen=True, slots=True)
class Planned:
    """One mutation planned on its shards: what the document opens with (``head``) and the
    per-shard plans to append."""

    head: MutationHead
    plans: list[ShardPlan]
    destructive: bool
    running: bool

    def dry_run(self) -> MutationDryRun:
        """The document of ``--dry-run``: what each shard would answer."""
        import msgspec

        from nereus.cli.mutation.document import MutationDryRun

        return MutationDryRun(**msgspec.structs.asdict(self.head),
                              receipts=[_would(p) for p in self.plans], result="DRY_RUN")


def plan(env: Env, *, build: Build, shards: Sequence[ShardId], who: Identity,
         dry_run: bool, wait: bool, ahead: Sequence[Planned] = ()) -> Planned:
    """Plan the mutation on every shard (``Planned.dry_run`` says what would be).

    ``ahead``: mutations of the same submission that go first; each shard's plan starts
    from the state they leave (see ``nereus.operator.plan_mutation``).
    """
    import msgspec

    from nereus.cli.mutation.document import MutationHead
    from nereus.errors import EngineUnreachable
    from nereus.operator import is_destructive, mutation_target

    running = env.engine_running()
    if wait and not dry_run and not running:
        raise EngineUnreachable(
            f"--wait needs the engine, and none runs on {env.home}",
            hint="start it with `nereus engine start`, or drop --wait for the QUEUED receipt")
    plans: list[ShardPlan] = []
    first: OperatorMutation | None = None
    for shard in shards:
        # a blank key is derived by the planner, which sees earlier results
        mutation = msgspec.structs.replace(build(shard), idempotency_key=who.idempotency_key or "")
        first = first or mutation
        before = [p.plan.data for item in ahead for p in item.plans
                  if p.shard == shard and p.to_append]
        plans.append(ShardPlan(shard, _plan(env, shard, mutation, running, before)))
    assert first is not None
    head = MutationHead(
        kind=_kind(first), target=mutation_target(first), operator=who.operator,
        operator_reason=who.reason,
        idempotency_key=plans[0].plan.idempotency_key if len(plans) == 1 else None,
        dry_run=dry_run, impact=_total_impact(plans))
    return Planned(head, plans, is_destructive(first), running)


def _kind(mutation: OperatorMutation) -> str:
    from nereus.records.codec import kind_of

    return kind_of(mutation)


def _plan(env: Env, shard: ShardId, mutation: OperatorMutation, running: bool,
          before: list[bytes]) -> PlanDocument:

    from nereus.operator.plan import PlanDocument
    from nereus.records import encode

    if running:
        from nereus.adapters.admin.wire import PlanAnswer, PlanRequest

        answer = env.admin().post("/v1/mutations/plan", PlanRequest(
            shard=str(shard), data=encode(mutation), before=before), PlanAnswer)
        return PlanDocument(**{name: getattr(answer, name)
                               for name in PlanDocument.__struct_fields__})
    from nereus.operator import plan_mutation
    from nereus.operator.plan import next_position, plan_document
    from nereus.state.store import ShardStore
    from nereus.state.view import EmptyView

    path = env.layout.shard_state(shard)
    now_ms = int(time.time() * 1000)
    if not (path / "CURRENT").exists():  # never applied anything yet
        tail = _unapplied(env, shard, 0)
        plan = plan_mutation(EmptyView(), mutation, shard=str(shard), broker_ms=now_ms,
                             before=tail + before)
        return plan_document(plan)
    with ShardStore.open(path, read_only=True) as store:
        tail = _unapplied(env, shard, next_position(store))
        plan = plan_mutation(store, mutation, shard=str(shard), broker_ms=now_ms,
                             before=tail + before)
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


def _total_impact(plans: list[ShardPlan]) -> MutationImpact:
    """The shards' impacts added up: lanes per shard, message transitions summed."""
    import msgspec

    from nereus.cli.mutation.document import AttemptImpact, LaneImpact, MutationImpact

    transitions: dict[str, int] = {}
    lanes: list[LaneImpact] = []
    attempts: list[AttemptImpact] = []
    paused: list[str] = []
    for p in plans:
        impact, shard = p.plan.impact, str(p.shard)
        for name, count in impact.message_transitions.items():
            transitions[name] = transitions.get(name, 0) + count
        lanes += [LaneImpact(shard=shard, **msgspec.structs.asdict(lane))
                  for lane in impact.lanes]
        attempts += [AttemptImpact(shard=shard, **msgspec.structs.asdict(a))
                     for a in impact.attempts]
        if not isinstance(impact.paused, msgspec.UnsetType):
            paused.append(f"{shard}: {'paused' if impact.paused else 'resumed'}")
    return MutationImpact(
        shards=len(plans), messages_changed=sum(transitions.values()),
        message_transitions=dict(sorted(transitions.items())),
        messages_held=sum(lane.scheduled for lane in lanes if _closes(lane)),
        lanes=lanes, attempts=attempts, shard_pause=paused or msgspec.UNSET)


def _closes(lane: LaneImpact) -> bool:
    gate = lane.changed.get("gate")
    return gate is not None and gate.after == "CLOSED"


def _would(p: ShardPlan) -> DryRunReceipt:
    from nereus.cli.mutation.document import DryRunReceipt

    plan = p.plan
    answer = plan.would if plan.earlier is None else plan.earlier
    return DryRunReceipt(
        shard=str(p.shard), source_position=None, broker_time=None, evidence="DRY_RUN",
        precondition_digest=plan.precondition_digest, idempotency_key=plan.idempotency_key,
        would_result=answer.status.value, would_reason=answer.reason,
        would_detail=readable_detail(answer.detail),
        duplicate_of=None if plan.earlier is None else plan.earlier.position)
