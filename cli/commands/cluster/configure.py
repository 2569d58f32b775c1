"""``nereus cluster init`` and ``nereus cluster config``: the cluster's configuration in
its coordinator (routes, lanes, shard limits, object store, checkpoints), versioned by
compare-and-set with an audit of who changed it and why.

A route's partition count never changes (message ids would hash to other shards), nor its
id or Shard Log backend, and a route is never dropped: ``--replace`` refuses such a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.commands.cluster.access import (
    CoordinatorOpt,
    DryRunOpt,
    OperatorOpt,
    cluster_store,
    now_ms,
)
from nereus.cli.commands.cluster.coordinator_security import (
    CoordinatorSecurity,
    PasswordEnvOpt,
    PasswordFileOpt,
    TlsCaOpt,
    TlsCertOpt,
    TlsKeyOpt,
    UsernameOpt,
    takes_coordinator_security,
)
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.cli.commands.cluster.documents import (
        ClusterConfigView,
        ClusterInitReport,
        ClusterLane,
        ClusterRoute,
    )
    from nereus.cli.mutation.options import Identity
    from nereus.cluster.records import ClusterConfig
    from nereus.config import Config
    from nereus.coordination.records import Version


def cluster_init(
    ctx: typer.Context,
    source: Annotated[Path, typer.Option(
        "--from", metavar="FILE.toml", help="The cluster's configuration: [routes.*] on kafka "
        "or pulsar, [lanes.*], [shard], [objects] shared by every node, [checkpoints].")],
    coordinator: CoordinatorOpt = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace the configuration the cluster has (by compare-and-set on "
        "the version read; needs --reason). Routes keep their partitions, id and log.")] = False,
    reason: Annotated[str | None, typer.Option(
        "--reason", help="Why (recorded in the configuration's audit with your identity).")]
    = None,
    operator: OperatorOpt = None,
    keys_from: Annotated[Path | None, typer.Option(
        "--evidence-keys-from", metavar="HOME", help="Take a new route's evidence key from "
        "HOME (a home whose routes join the cluster) instead of making a fresh one.")] = None,
    dry_run: DryRunOpt = False,
    tls_ca_file: TlsCaOpt = None,
    tls_cert_file: TlsCertOpt = None,
    tls_key_file: TlsKeyOpt = None,
    username: UsernameOpt = None,
    password_file: PasswordFileOpt = None,
    password_env: PasswordEnvOpt = None,
) -> None:
    """Write the cluster's configuration into its coordinator (the first, or --replace).

    Also gives each route an evidence key in the coordinator, made once and never changed:
    `nereus init --join` writes it into each node's home, so every node signs and checks
    destination evidence alike. A secured coordinator is reached with --tls-ca-file (and
    --tls-cert-file/--tls-key-file, --username/--password-file), or, run from a node's home
    of that coordinator, with its [cluster] settings."""
    import msgspec

    from nereus.cli.commands.cluster.documents import ClusterInitReport
    from nereus.cli.mutation.options import identity
    from nereus.cli.output import shown

    env: Env = ctx.obj
    text, config = _source(source, replace=replace, reason=reason)
    who = identity(operator, reason or "cluster init", None, None)
    security = CoordinatorSecurity(tls_ca_file, tls_cert_file, tls_key_file, username,
                                   password_file, password_env)
    with cluster_store(env, coordinator, create=True, security=security) as store:
        store.refuse_moved()  # a cluster that moved is configured where it went
        current = store.config()
        if current is not None:
            _refuse_replacing(store, current[0], config, replace=replace)
        revision = 1 if current is None else current[0].revision + 1
        made = [] if dry_run else _write_config(store, text, config, who,
                                                None if current is None else current[1],
                                                keys_from=keys_from)
        report = ClusterInitReport(
            cluster=store.handle.cluster, coordinator=store.url, revision=revision,
            routes=_routes(config), lanes=_lanes(config), changed_by=who.operator,
            reason=who.reason, replaced=current is not None, dry_run=dry_run,
            new_evidence_keys=made)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_init(out, shown(report)))


def _source(source: Path, *, replace: bool, reason: str | None) -> tuple[str, Config]:
    """The text of the cluster's configuration file and what it says, checked."""
    from nereus.adapters.cluster.home_config import check_cluster_text
    from nereus.errors import NotFound, UsageError

    if not source.is_file():
        raise NotFound(f"no configuration file at {source}")
    text = source.read_text()
    config = check_cluster_text(text, source=str(source))
    if replace and not (reason or "").strip():
        raise UsageError("--replace needs --reason: every change of a cluster's configuration "
                         "is recorded with who made it and why")
    return text, config


def _refuse_replacing(store: ClusterStore, was: ClusterConfig, config: Config, *,
                      replace: bool) -> None:
    """The cluster has configuration ``was``: refused without ``--replace``, and a route
    that would change (see the module's docstring)."""
    from nereus.errors import NereusError

    if not replace:
        raise NereusError(
            f"cluster {store.handle.cluster} has a configuration already (revision "
            f"{was.revision}, by {was.changed_by}: {was.reason})",
            hint="`nereus cluster config` shows it; pass --replace --reason R to change it")
    _refuse_route_changes(config, was.toml, revision=was.revision)


def _write_config(store: ClusterStore, text: str, config: Config, who: Identity,
                  expected: Version | None, *, keys_from: Path | None) -> list[str]:
    """Write the configuration by compare-and-set on ``expected`` (None: there is none yet),
    then give each new route its evidence key; the routes whose key was made here."""
    from nereus.adapters.cluster.route_keys import share_route_keys
    from nereus.coordination.errors import UnexpectedVersionId
    from nereus.errors import NereusError

    try:
        store.write_config(text, changed_by=who.operator, reason=who.reason, now_ms=now_ms(),
                           expected=expected, summary=_summary(config))
    except UnexpectedVersionId:
        raise NereusError("the cluster's configuration changed while this ran; "
                          "nothing was written", hint="look at `nereus cluster "
                          "config` and run it again") from None
    return share_route_keys(store, config.routes, now_ms=now_ms(), made_by=who.operator,
                            keys_from=keys_from)


def _refuse_route_changes(new: Config, before_toml: str, *, revision: int) -> None:
    """A route keeps its partitions, id and log, and stays (see the module's docstring)."""
    from nereus.config import parse_config
    from nereus.errors import UsageError

    old = parse_config(before_toml, source=f"the cluster's configuration r{revision}")
    problems: list[str] = []
    for name, was in sorted(old.routes.items()):
        now = new.routes.get(name)
        if now is None:
            problems.append(f"route {name} would be dropped")
            continue
        if now.partitions != was.partitions:
            problems.append(f"route {name}'s partitions would change from {was.partitions} to "
                            f"{now.partitions}, moving message ids to other shards")
        if now.id != was.id:
            problems.append(f"route {name}'s id would change from {was.id!r} to {now.id!r}")
        if now.log != was.log:
            problems.append(f"route {name}'s log would change from {was.log} to {now.log}")
    if problems:
        raise UsageError(
            "the cluster's configuration was left as it was: " + "; ".join(problems),
            hint="a route's partitions, id and log never change: keep them as `nereus cluster "
                 "config` shows, or add a new route")


def _summary(config: Config) -> str:
    routes = ", ".join(f"{r.name} ({r.partitions} on {r.log})" for r in config.routes.values())
    return f"routes {routes}; lanes {', '.join(config.lanes) or 'none'}"


def _routes(config: Config) -> list[ClusterRoute]:
    from nereus.cli.commands.cluster.documents import ClusterRoute

    return [ClusterRoute(route=r.name, log=r.log, partitions=r.partitions, route_id=r.id)
            for r in config.routes.values()]


def _lanes(config: Config) -> list[ClusterLane]:
    from nereus.cli.commands.cluster.documents import ClusterLane

    return [ClusterLane(lane=lane.name, destination=lane.destination)
            for lane in config.lanes.values()]


def _print_init(out: Console, report: ClusterInitReport) -> None:
    verb = "would write" if report.dry_run else "wrote"
    out.print(f"{verb} revision {report.revision} of cluster {report.cluster}'s configuration "
              f"at {report.coordinator} (by {report.changed_by}: {report.reason})")
    for route in report.routes:
        out.print(f"  route {route.route}: {route.partitions} shard(s) on the {route.log} log")
    for lane in report.lanes:
        out.print(f"  lane {lane.lane} -> {lane.destination}")
    if report.new_evidence_keys:
        out.print(f"  made the evidence key of {', '.join(report.new_evidence_keys)}")
    if not report.dry_run:
        out.print(f"  nodes join with `nereus init --join {report.coordinator} --node-id ID`")


@takes_coordinator_security
def cluster_config(ctx: typer.Context, coordinator: CoordinatorOpt = None) -> None:
    """The cluster's configuration as its coordinator holds it, with its audit."""
    import msgspec

    from nereus.cli.commands.cluster.documents import AuditRow, ClusterConfigView
    from nereus.cli.output import shown
    from nereus.config import parse_config

    env: Env = ctx.obj
    with cluster_store(env, coordinator) as store:
        record = store.require_config()
        audit = store.audit()
        cluster, url = store.handle.cluster, store.url
    config = parse_config(record.toml, source=f"the cluster's configuration r{record.revision}")
    view = ClusterConfigView(
        cluster=cluster, coordinator=url, revision=record.revision,
        changed_by=record.changed_by, reason=record.reason, changed_ms=record.changed_ms,
        routes=_routes(config), lanes=_lanes(config), toml=record.toml,
        audit=[AuditRow(revision=a.revision, changed_by=a.changed_by, reason=a.reason,
                        changed_ms=a.changed_ms, summary=a.summary) for a in audit])
    env.output.emit(msgspec.to_builtins(view), lambda out: _print_config(out, shown(view)))


def _print_config(out: Console, view: ClusterConfigView) -> None:
    from rich.table import Table

    out.print(f"cluster {view.cluster} at {view.coordinator}: revision {view.revision} "
              f"(by {view.changed_by}: {view.reason})\n")
    out.print(view.toml.rstrip("\n"))
    table = Table("revision", "changed", "by", "reason", "summary", title="audit")
    for row in view.audit:
        table.add_row(str(row.revision), _utc(row.changed_ms), row.changed_by, row.reason,
                      row.summary)
    out.print(table)


def _utc(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
