"""Planned moves, as operator actions: ``nereus shard move SHARD --to NODE`` pins a shard's
placement on a node, ``nereus cluster drain NODE`` asks that a node own nothing, and
``nereus cluster undrain NODE`` takes that back.

Each records who asked and why in the record it writes (``Placement.operator``/``reason``,
``Drain``), checks its target first, shows what it would do with ``--dry-run``, and asks
for confirmation (``--yes`` in scripts). The leader turns the records into placements and
the nodes hand the shards over; ``--wait SECONDS`` follows the ownership records until the
move is done (exit 6 if it is not by then).

NODE is the id the operator gave the node (``init --join --node-id n2``): a drain of ``n2``
drains its worker processes ``n2-w<K>`` (the leader counts them drained), a move to ``n2``
is placed on the worker of ``n2`` that holds the fewest shards. A worker's own id is
accepted too (that worker alone).
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
from nereus.cli.commands.cluster.coordinator_security import takes_coordinator_security
from nereus.cli.context import Env
from nereus.cli.mutation.options import ReasonOpt
from nereus.cluster.names import members_of, node_of

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.cluster_store import ClusterStore
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
NodeArg = Annotated[str, typer.Argument(
    metavar="NODE", help="The node's id (as given to `init --join --node-id`).")]


@takes_coordinator_security
def shard_move(
    ctx: typer.Context,
    shard: Annotated[str, typer.Argument(help="The shard (ROUTE/PARTITION).")],
    to: Annotated[str, typer.Option("--to", metavar="NODE",
                                    help="The live node to own it (its given id).")],
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
        member = _check_move(store, target, to)
        owned = store.owners().get(target)
        placed = store.placements().get(target)
        owner = None if owned is None else node_of(owned.record.node_id)
        report = _move_report(store, target, to, member, who, owner=owner,
                              placed_on=None if placed is None else node_of(placed[0].node_id),
                              result="DRY_RUN")
        if not dry_run:
            if not yes:
                from nereus.cli.mutation.confirmation import ask

                ask(f"move shard {target} from {owner or 'no owner'} to {to}")
            _pin(store, target, member, who)
            done = wait is not None and _await(store, _owner_prefix(target), wait,
                                               lambda: _moved(store, target, member))
            result: MoveResult = "PLACED" if wait is None else "MOVED" if done else "NOT_YET"
            report = _move_report(store, target, to, member, who, owner=owner,
                                  placed_on=report.placed_on, result=result)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_move(out, shown(report)))
    _not_yet(report.result)


def _check_move(store: ClusterStore, shard: ShardId, to: str) -> str:
    """The shard is the cluster's; the node is live and not draining. The member to place
    the shard on: the node itself, or its worker holding the fewest shards."""
    from nereus.cluster.status import configured_shards
    from nereus.errors import NotFound, UsageError

    config = store.require_config()
    if shard not in configured_shards(config.toml, source="the cluster's configuration"):
        raise NotFound(f"shard {shard} is not a shard of cluster {store.handle.cluster}",
                       hint="`nereus cluster status` lists its shards")
    members = store.members()
    candidates = members_of(to, members)
    if not candidates:
        live = ", ".join(sorted({node_of(m) for m in members})) or "none"
        raise NotFound(f"no live node {to!r} in cluster {store.handle.cluster} (live: {live})",
                       hint="a node is live while its engine runs; `nereus cluster nodes`")
    drains = store.drains()
    open_ = [m for m in candidates if m not in drains and node_of(m) not in drains]
    if not open_:
        raise UsageError(f"node {to} is draining: it takes no shard",
                         hint=f"undrain it first: nereus cluster undrain {node_of(to)} "
                              "--reason TEXT")
    held: dict[str, int] = {}
    for placement, _ in store.placements().values():
        held[placement.node_id] = held.get(placement.node_id, 0) + 1
    return min(open_, key=lambda m: (held.get(m, 0), m))


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


def _move_report(store: ClusterStore, shard: ShardId, to: str, member: str, who: Identity,
                 *, owner: str | None, placed_on: str | None,
                 result: MoveResult) -> ShardMoveReport:
    from nereus.cli.commands.cluster.documents import ShardMoveReport
    from nereus.cluster.status import shard_state

    owned = store.owners().get(shard)
    placed = store.placements().get(shard)
    return ShardMoveReport(
        shard=str(shard), to=node_of(to), to_worker=None if member == node_of(member)
        else member, owner=owner, placed_on=placed_on, operator=who.operator,
        reason=who.reason, result=result,
        state=shard_state(None if owned is None else owned.record,
                          None if placed is None else placed[0]))


def _print_move(out: Console, report: ShardMoveReport) -> None:
    said = {"DRY_RUN": "would move", "PLACED": "placed", "MOVED": "moved",
            "NOT_YET": "placed (not moved yet)"}[report.result]
    target = report.to + (f" ({report.to_worker})" if report.to_worker else "")
    out.print(f"{said} shard {report.shard} -> {target} (from {report.owner or 'no owner'};"
              f" by {report.operator}: {report.reason}); now {report.state}")


def _not_yet(result: str) -> None:
    if result == "NOT_YET":
        from nereus.cli.output import Answered
        from nereus.errors import ExitCode

        raise Answered(ExitCode.RESULT_NOT_KNOWN)


@takes_coordinator_security
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
    """Drain a node (and its worker processes): the leader places its shards on other
    nodes, which take them over by planned moves (asks for confirmation). It stays drained
    until `cluster undrain`."""
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
        if not members_of(node, known) and node not in view.drains:
            names = ", ".join(sorted({node_of(name) for name in known})) or "none"
            raise NotFound(f"no node {node!r} in cluster {store.handle.cluster} "
                           f"(nodes: {names})", hint="`nereus cluster nodes` lists them")
        drained = set(members_of(node, view.members))
        if not {m for m in view.members if m not in view.drains
                and node_of(m) not in view.drains} - drained:
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
    """The shards the node owns, itself or through its workers."""
    return [str(shard) for shard, owned in sorted(store.owners().items())
            if members_of(node, [owned.record.node_id])]


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


@takes_coordinator_security
def cluster_undrain(
    ctx: typer.Context,
    node: NodeArg,
    reason: Annotated[str, typer.Option(
        "--reason", help="Why (shown in the report with your identity).")] = "",
    operator: OperatorOpt = None,
    coordinator: CoordinatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
) -> None:
    """Take a drain back: the node (and its workers) may own shards again; the leader
    rebalances. Asks for confirmation on a terminal (`--yes` skips it); without one it goes
    ahead, as taking a drain back moves no shard away from a live node."""
    import msgspec

    from nereus.cli.commands.cluster.documents import NodeUndrainReport
    from nereus.cli.mutation.options import identity
    from nereus.cli.output import safe_markup

    env: Env = ctx.obj
    who = identity(operator, reason or "-", None, None)
    with cluster_store(env, coordinator) as store:
        store.require_config()
        drains = store.drains()
        # the node's own drain, and any of its workers' (a drain by a worker's id)
        names = members_of(node, drains)
        if names and not dry_run and not yes:
            import sys

            if sys.stdin.isatty():
                from nereus.cli.mutation.confirmation import ask

                ask(f"undrain node {node} (the leader may place shards on it again)")
        undrained = bool(names) and not dry_run and any([store.undrain(n) for n in names])
        report = NodeUndrainReport(node_id=node, undrained=undrained, operator=who.operator,
                                   reason=reason, dry_run=dry_run)
    shown_node = safe_markup(node)
    said = ("would undrain" if dry_run and names else
            "may own shards again" if undrained else "was not draining")
    env.output.emit(msgspec.to_builtins(report), lambda out: out.print(
        f"node {shown_node} {said}" + (f" (by {safe_markup(who.operator)}: "
                                       f"{safe_markup(reason)})" if reason else "")))
