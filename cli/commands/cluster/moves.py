"""Planned moves, as operator actions: ``nereus shard move SHARD --to NODE`` pins a shard's
placement on a node, ``nereus cluster drain NODE`` asks that a node own nothing, and
``nereus cluster undrain NODE`` takes that back.

Each records who asked and why in the record it writes (``Placement.operator``/``reason``,
``Drain``), checks its target first, shows what it would do with ``--dry-run``, and asks
for confirmation (``--yes`` in scripts). The leader turns the records into placements and
the nodes hand the shards over; ``--wait SECONDS`` follows the ownership records until the
move is done (exit 6 if it is not by then).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.commands.cluster.access import (
    ConfirmOpt,
    CoordinatorOpt,
    DryRunOpt,
    OperatorOpt,
    cluster_store,
    now_ms,
)
from nereus.cli.context import Env
from nereus.cli.mutation.options import ReasonOpt

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.store import ClusterStore
    from nereus.cli.commands.cluster.documents import (
        DrainResult,
        MoveResult,
        NodeDrainReport,
        ShardMoveReport,
    )
    from nereus.cli.mutation.options import Identity
    from nereus.shard import ShardId

WaitOpt = Annotated[float | None, typer.Option(
    "--wait", metavar="SECONDS", min=0, max=86_400,
    help="Wait up to SECONDS until it is done (exit 6 if it is not by then).")]
NodeArg = Annotated[str, typer.Argument(metavar="NODE", help="The node's id.")]


def shard_move(
    ctx: typer.Context,
    shard: Annotated[str, typer.Argument(help="The shard (ROUTE/PARTITION).")],
    to: Annotated[str, typer.Option("--to", metavar="NODE", help="The live node to own it.")],
    reason: ReasonOpt,
    operator: OperatorOpt = None,
    coordinator: CoordinatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
    wait: WaitOpt = None,
) -> None:
    """Move a shard to another node of the cluster (a planned move, asks for confirmation).

    Pins the shard's placement on NODE: its owner stops claiming, lets its in-flight
    outcomes reach the log, takes a checkpoint and releases it; NODE takes it over."""
    import msgspec

    from nereus.cli.mutation.options import identity
    from nereus.cli.output import shown
    from nereus.shard import ShardId

    env: Env = ctx.obj
    who = identity(operator, reason, None, None)
    target = ShardId.parse(shard)
    with cluster_store(env, coordinator) as store:
        _check_move(store, target, to)
        owned = store.owners().get(target)
        placed = store.placements().get(target)
        owner = None if owned is None else owned.record.node_id
        report = _move_report(store, target, to, who, owner=owner,
                              placed_on=None if placed is None else placed[0].node_id,
                              result="DRY_RUN")
        if not dry_run:
            if not yes:
                from nereus.cli.mutation.confirmation import ask

                ask(f"move shard {target} from {owner or 'no owner'} to {to}")
            _pin(store, target, to, who)
            done = wait is not None and _await(store, _owner_prefix(target), wait,
                                               lambda: _moved(store, target, to))
            result: MoveResult = "PLACED" if wait is None else "MOVED" if done else "NOT_YET"
            report = _move_report(store, target, to, who, owner=owner,
                                  placed_on=report.placed_on, result=result)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_move(out, shown(report)))
    _not_yet(report.result)


def _check_move(store: ClusterStore, shard: ShardId, to: str) -> None:
    """The shard is the cluster's; the node is live and not draining."""
    from nereus.cluster.status import configured_shards
    from nereus.errors import NotFound, UsageError

    config = store.require_config()
    if shard not in configured_shards(config.toml, source="the cluster's configuration"):
        raise NotFound(f"shard {shard} is not a shard of cluster {store.handle.cluster}",
                       hint="`nereus cluster status` lists its shards")
    members = store.members()
    if to not in members:
        live = ", ".join(sorted(members)) or "none"
        raise NotFound(f"no live node {to!r} in cluster {store.handle.cluster} (live: {live})",
                       hint="a node is live while its engine runs; `nereus cluster nodes`")
    if to in store.drains():
        raise UsageError(f"node {to} is draining: it takes no shard",
                         hint=f"undrain it first: nereus cluster undrain {to}")


def _pin(store: ClusterStore, shard: ShardId, to: str, who: Identity) -> None:
    """Write the pinned placement by CAS on the version read (again if the leader wrote
    meanwhile: the pin is what the operator asked for, whatever the leader planned)."""
    from nereus.cluster.records import Placement
    from nereus.coordination.errors import UnexpectedVersionId
    from nereus.errors import NereusError

    placement = Placement(shard=str(shard), node_id=to, reason=who.reason, pinned=True,
                          operator=who.operator, since_ms=now_ms())
    for _ in range(5):
        placed = store.placements().get(shard)
        try:
            store.place(shard, placement, expected=None if placed is None else placed[1])
            return
        except UnexpectedVersionId:
            continue
    raise NereusError(f"the placement of {shard} kept changing; nothing was written",
                      hint="run the command again")


def _owner_prefix(shard: ShardId) -> str:
    from nereus.cluster import keys

    return keys.owner_key(shard)


def _moved(store: ClusterStore, shard: ShardId, to: str) -> bool:
    from nereus.cluster.records import OwnerState

    owned = store.owners().get(shard)
    return owned is not None and owned.record.node_id == to and \
        owned.record.state == OwnerState.ACTIVE


def _await(store: ClusterStore, prefix: str, seconds: float, done: Callable[[], bool]) -> bool:
    """Whether ``done()`` holds within ``seconds``: looked at again on each change under
    ``prefix`` (and at least every second)."""
    import time

    from nereus.coordination.errors import NotificationsLost

    deadline = time.monotonic() + seconds
    coordinator = store.handle.coordinator
    watch = coordinator.get_notifications(store.key(prefix))
    try:
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                watch.poll(min(left, 1.0))
            except NotificationsLost:
                watch.close()
                watch = coordinator.get_notifications(store.key(prefix))
        return True
    finally:
        watch.close()


def _move_report(store: ClusterStore, shard: ShardId, to: str, who: Identity, *,
                 owner: str | None, placed_on: str | None,
                 result: MoveResult) -> ShardMoveReport:
    from nereus.cli.commands.cluster.documents import ShardMoveReport
    from nereus.cluster.status import shard_state

    owned = store.owners().get(shard)
    placed = store.placements().get(shard)
    return ShardMoveReport(
        shard=str(shard), to=to, owner=owner, placed_on=placed_on, operator=who.operator,
        reason=who.reason, result=result,
        state=shard_state(None if owned is None else owned.record,
                          None if placed is None else placed[0]))


def _print_move(out: Console, report: ShardMoveReport) -> None:
    said = {"DRY_RUN": "would move", "PLACED": "placed", "MOVED": "moved",
            "NOT_YET": "placed (not moved yet)"}[report.result]
    out.print(f"{said} shard {report.shard} -> {report.to} (from {report.owner or 'no owner'};"
              f" by {report.operator}: {report.reason}); now {report.state}")


def _not_yet(result: str) -> None:
    if result == "NOT_YET":
        from nereus.cli.output import Answered
        from nereus.errors import ExitCode

        raise Answered(ExitCode.RESULT_NOT_KNOWN)


def cluster_drain(
    ctx: typer.Context,
    node: NodeArg,
    reason: ReasonOpt,
    operator: OperatorOpt = None,
    coordinator: CoordinatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
    wait: WaitOpt = None,
) -> None:
    """Drain a node: the leader places its shards on other nodes, which take them over by
    planned moves (asks for confirmation). It stays drained until `cluster undrain`."""
    import msgspec

    from nereus.cli.mutation.options import identity
    from nereus.cli.output import shown
    from nereus.cluster.records import Drain
    from nereus.errors import NotFound

    env: Env = ctx.obj
    who = identity(operator, reason, None, None)
    with cluster_store(env, coordinator) as store:
        store.require_config()
        view = store.snapshot()
        known = {*view.members, *view.drains, *(o.node_id for o in view.owners.values()),
                 *(p.node_id for p in view.placements.values())}
        if node not in known:
            raise NotFound(f"no node {node!r} in cluster {store.handle.cluster}",
                           hint="`nereus cluster nodes` lists them")
        if not set(view.members) - set(view.drains) - {node}:
            env.output.warn(f"no other live node can take {node}'s shards: they stay where "
                            "they are until one joins")
        result: DrainResult = "DRY_RUN"
        if not dry_run:
            if not yes:
                from nereus.cli.mutation.confirmation import ask

                ask(f"drain node {node} ({len(_owned_by(store, node))} shard(s) move away)")
            store.drain(Drain(node_id=node, operator=who.operator, reason=who.reason,
                              since_ms=now_ms()))
            from nereus.cluster import keys

            done = wait is not None and _await(store, keys.OWNERS, wait,
                                               lambda: not _owned_by(store, node))
            result = "DRAINING" if wait is None else "DRAINED" if done else "NOT_YET"
        report = _drain_report(store, node, who, result)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_drain(out, shown(report)))
    _not_yet(report.result)


def _owned_by(store: ClusterStore, node: str) -> list[str]:
    return [str(shard) for shard, owned in sorted(store.owners().items())
            if owned.record.node_id == node]


def _drain_report(store: ClusterStore, node: str, who: Identity,
                  result: DrainResult) -> NodeDrainReport:
    from nereus.cli.commands.cluster.documents import NodeDrainReport

    return NodeDrainReport(node_id=node, operator=who.operator, reason=who.reason,
                           result=result,
                           shards=_owned_by(store, node))


def _print_drain(out: Console, report: NodeDrainReport) -> None:
    said = {"DRY_RUN": "would drain", "DRAINING": "draining", "DRAINED": "drained",
            "NOT_YET": "draining (not done yet)"}[report.result]
    owns = ", ".join(report.shards) or "nothing"
    out.print(f"{said} node {report.node_id} (by {report.operator}: {report.reason}); "
              f"it owns {owns}")


def cluster_undrain(ctx: typer.Context, node: NodeArg,
                    coordinator: CoordinatorOpt = None) -> None:
    """Take a drain back: the node may own shards again (the leader rebalances)."""
    import msgspec

    from nereus.cli.commands.cluster.documents import NodeUndrainReport
    from nereus.cli.output import safe_markup

    env: Env = ctx.obj
    with cluster_store(env, coordinator) as store:
        store.require_config()
        report = NodeUndrainReport(node_id=node, undrained=store.undrain(node))
    shown_node = safe_markup(node)
    env.output.emit(msgspec.to_builtins(report), lambda out: out.print(
        f"node {shown_node} "
        + ("may own shards again" if report.undrained else "was not draining")))
