"""``nereus upgrade``: check a home before a new build runs it, show and raise the feature
level (``docs/formats.md``).

``check`` is offline (``pg_upgrade --check``: ``adapters/offline/upgrade_check.py``).
``status`` shows the level in force, this build's, and on a cluster every node's build and
level. ``finalize`` raises the level (by default to this build's) once every node that
owns or may own a shard supports it: on a cluster in the coordinator
(``adapters/cluster/feature_levels.py``), on a single home in its ``feature-level.json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from nereus.cli.commands.cluster.access import ConfirmOpt, CoordinatorOpt, DryRunOpt, OperatorOpt
from nereus.cli.commands.cluster.coordinator_security import takes_coordinator_security
from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.offline.upgrade_check import UpgradeCheck
    from nereus.cluster.records import FeatureLevel

app = typer.Typer(help="Upgrades: check a home offline, show and raise the feature level.",
                  no_args_is_help=True)


class NodeLevel(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A node that owns or may own a shard: its build and the level it supports."""

    node_id: str
    alive: bool
    build: str  # empty: not alive (its build is not known)
    feature_level: int  # what its build supports (not alive: counted as 1)


class UpgradeStatus(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The feature level in force and who could take the next one."""

    scope: str  # cluster or home
    feature_level: int
    means: str
    raised_by: str
    reason: str
    raised_ms: int
    build: str
    build_level: int
    nodes: list[NodeLevel]
    blockers: list[str]  # why `finalize` to this build's level would refuse now


class UpgradeFinalize(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What ``finalize`` did."""

    scope: str
    result: str  # RAISED, UNCHANGED or DRY_RUN
    from_level: int
    to_level: int
    operator: str
    reason: str
    late: list[str]  # nodes below the level that joined while it was raised


def _cluster(env: Env, coordinator: str | None) -> bool:
    return coordinator is not None or (env.layout.config.exists()
                                       and env.config.cluster is not None)


@app.command("check")
def check(ctx: typer.Context) -> None:
    """Offline, like pg_upgrade --check: what this home needs before this build runs it
    (each shard's key schema and the migration steps the engine runs at its first open,
    checkpoints in an older manifest format, the home's feature level) and what will
    change. Exit status 1 when this build must not run the home (a downgrade below what
    has been written: a newer key schema or feature level)."""
    from nereus.adapters.offline.upgrade_check import check_home
    from nereus.shard import ShardId

    env: Env = ctx.obj
    shards = [ShardId(route.name, p) for route in env.config.routes.values()
              for p in range(route.partitions)]
    report = check_home(env.home, shards, env.object_store())
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_check(out, report))
    if not report.ok:
        raise Answered(ExitCode.NO)


def _print_check(out: Console, report: UpgradeCheck) -> None:
    out.print(f"build {report.build} (feature level {report.build_level}); home at feature "
              f"level {report.home_level}: {report.home_level_means}")
    for shard in report.shards:
        found = "-" if shard.schema_version is None else str(shard.schema_version)
        out.print(f"  {shard.shard}  key schema {found}  {shard.verdict}  {shard.detail}")
    for line in report.changes or ["nothing changes"]:
        out.print(f"  change: {line}")
    for line in report.refusals:
        out.print(f"  REFUSED: {line}")
    out.print("ready" if report.ok else "this build must not run this home")


def _cluster_status(store: ClusterStore
                    ) -> tuple[list[NodeLevel], list[str], FeatureLevel]:
    from nereus.adapters.cluster.feature_levels import node_levels, read_level
    from nereus.adapters.home.feature_level import build_level
    from nereus.features import finalize_blockers

    members = store.members()
    nodes = [NodeLevel(node_id=node, alive=node in members,
                       build=members[node].version if node in members else "",
                       feature_level=level)
             for node, level in sorted(node_levels(store).items())]
    blockers = finalize_blockers(build_level(), {n.node_id: n.feature_level for n in nodes})
    return nodes, blockers, read_level(store).level


@app.command("status")
@takes_coordinator_security
def status(ctx: typer.Context, coordinator: CoordinatorOpt = None) -> None:
    """The feature level in force (the cluster's with --coordinator or a [cluster] table,
    else this home's), this build's, and on a cluster every node that owns or may own a
    shard with its build and supported level; blockers say why `finalize` would refuse."""
    from nereus import __version__
    from nereus.adapters.home.feature_level import build_level, home_level
    from nereus.cli.commands.cluster.access import cluster_store
    from nereus.features import describe, finalize_blockers

    env: Env = ctx.obj
    nodes: list[NodeLevel] = []
    if _cluster(env, coordinator):
        with cluster_store(env, coordinator) as store:
            store.require_config()
            nodes, blockers, found = _cluster_status(store)
        scope = "cluster"
    else:
        found, scope = home_level(env.home), "home"
        blockers = finalize_blockers(build_level(), {})
    report = UpgradeStatus(
        scope=scope, feature_level=found.level, means=describe(found.level),
        raised_by=found.raised_by, reason=found.reason, raised_ms=found.raised_ms,
        build=__version__, build_level=build_level(), nodes=nodes, blockers=blockers)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_status(out, report))


def _print_status(out: Console, report: UpgradeStatus) -> None:
    out.print(f"{report.scope} at feature level {report.feature_level}: {report.means}")
    out.print(f"this build {report.build} supports feature level {report.build_level}")
    for node in report.nodes:
        out.print(f"  node {node.node_id}  {'alive' if node.alive else 'not alive'}  "
                  f"build {node.build or '?'}  level {node.feature_level}")
    for line in report.blockers:
        out.print(f"  blocks finalize: {line}")


@app.command("finalize")
@takes_coordinator_security
def finalize(
    ctx: typer.Context,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded with your identity).")],
    to: Annotated[int | None, typer.Option(
        "--to", min=1, metavar="LEVEL",
        help="The level to raise to (default: the highest this build supports).")] = None,
    operator: OperatorOpt = None,
    coordinator: CoordinatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
) -> None:
    """Raise the feature level once every node that owns or may own a shard runs a build
    that supports it; from then on new formats may be written, and a node whose build
    supports less refuses to join. A level is never lowered. Asks for confirmation
    (`--yes` skips it). Exit status 1 when a node (named) supports less, or this build
    does."""
    from nereus.cli.mutation.options import identity

    env: Env = ctx.obj
    who = identity(operator, reason, None, None)
    if _cluster(env, coordinator):
        report = _finalize_cluster(env, coordinator, to, who.operator, reason,
                                   dry_run=dry_run, yes=yes)
    else:
        report = _finalize_home(env, to, who.operator, reason, dry_run=dry_run, yes=yes)
    env.output.emit(msgspec.to_builtins(report), lambda out: out.print(
        f"{report.scope} feature level {report.from_level} -> {report.to_level}: "
        f"{report.result}" + "".join(f"\n  joined while raising: {n}" for n in report.late)))


def _target(to: int | None) -> int:
    from nereus.adapters.home.feature_level import build_level
    from nereus.features import FeatureLevelError

    supported = build_level()
    if to is not None and to > supported:
        raise FeatureLevelError(f"this build supports feature level {supported}, not {to}")
    return supported if to is None else to


def _confirm(what: str, *, dry_run: bool, yes: bool) -> None:
    if not dry_run and not yes:
        from nereus.cli.mutation.confirmation import ask

        ask(what)


def _finalize_cluster(env: Env, coordinator: str | None, to: int | None, operator: str,
                      reason: str, *, dry_run: bool, yes: bool) -> UpgradeFinalize:
    import time

    from nereus.adapters.cluster.feature_levels import node_levels, raise_level, read_level
    from nereus.cli.commands.cluster.access import cluster_store
    from nereus.features import FeatureLevelError, finalize_blockers

    target = _target(to)
    with cluster_store(env, coordinator) as store:
        store.require_config()
        current = read_level(store).level.level
        result, late = "UNCHANGED", list[str]()
        if target != current or dry_run:
            blockers = finalize_blockers(target, node_levels(store))
            if blockers and dry_run:
                raise FeatureLevelError("; ".join(blockers))
            _confirm(f"raise the cluster's feature level to {target}", dry_run=dry_run,
                     yes=yes)
            if dry_run:
                result = "DRY_RUN"
            else:
                _, late = raise_level(store, target, operator=operator, reason=reason,
                                      now_ms=int(time.time() * 1000))
                result = "RAISED"
    return UpgradeFinalize(scope="cluster", result=result, from_level=current,
                           to_level=target, operator=operator, reason=reason, late=late)


def _finalize_home(env: Env, to: int | None, operator: str, reason: str, *,
                   dry_run: bool, yes: bool) -> UpgradeFinalize:
    import time

    from nereus.adapters.home.feature_level import home_level, write_home_level
    from nereus.cluster.records import FeatureLevel
    from nereus.features import FeatureLevelError

    target = _target(to)
    current = home_level(env.home).level
    if target < current:
        raise FeatureLevelError(f"the home is at feature level {current}; a level is never "
                                f"lowered (asked for {target})")
    result = "UNCHANGED" if target == current else "DRY_RUN" if dry_run else "RAISED"
    if result == "RAISED":
        _confirm(f"raise this home's feature level to {target}", dry_run=dry_run, yes=yes)
        write_home_level(env.home, FeatureLevel(level=target, raised_by=operator,
                                                reason=reason,
                                                raised_ms=int(time.time() * 1000)))
    return UpgradeFinalize(scope="home", result=result, from_level=current, to_level=target,
                           operator=operator, reason=reason, late=[])
