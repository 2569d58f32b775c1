"""``nereus cluster migrate --to URL``: a stopped cluster copied to another coordinator
(etcd to Oxia and back, or any two of Oxia, etcd and SQLite); ``nereus cluster rejoin --to
URL``: a node's home names that coordinator from then on.

The migration copies the configuration and its audit, placements, drains, route evidence
keys, the checkpoint catalog and every shard's epoch counter
(``nereus.adapters.cluster.migration`` says what, in which order, and what it refuses),
then marks the old place moved, so no node starts there again. A node's home names its
coordinator in one line of its ``nereus.toml`` (``[cluster] coordinator``); ``rejoin``
rewrites that line, in each node's home, after checking that the coordinator holds a
copy of this very cluster. Then ``nereus engine start`` joins there, and every shard
activates with an epoch above the one it had.
"""

from __future__ import annotations

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
from nereus.cli.commands.cluster.coordinator_security import (
    CoordinatorSecurity,
    takes_coordinator_security,
)
from nereus.cli.context import Env
from nereus.cli.mutation.options import ReasonOpt

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.migration import Migration
    from nereus.cli.commands.cluster.documents import (
        ClusterMigrateReport,
        ClusterRejoinReport,
        RejoinResult,
    )
    from nereus.config import ClusterSettings

ToOpt = Annotated[str, typer.Option(
    "--to", metavar="URL", help="The other coordinator: oxia://HOST:PORT/CLUSTER, "
    "etcd://HOST:PORT/CLUSTER or sqlite:///ABSOLUTE/PATH.db/CLUSTER.")]


@takes_coordinator_security
def cluster_migrate(
    ctx: typer.Context,
    to: ToOpt,
    reason: ReasonOpt,
    coordinator: CoordinatorOpt = None,
    operator: OperatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
) -> None:
    """Copy a stopped cluster to another coordinator (asks for confirmation).

    Copies the configuration and its audit, placements, drains, route evidence keys, the
    checkpoint catalog and each shard's epoch counter, then marks the old place moved (no
    node starts there again). Refused while any node is live (each is named) and when the
    target holds another cluster. Then run `nereus cluster rejoin --to URL` in each node's
    home and start the nodes: every shard activates with a higher epoch than it had.
    The TLS and auth options are the target's (--to); the source is reached as any
    cluster command reaches --coordinator or the home's [cluster]."""
    import msgspec

    from nereus.adapters.cluster.migration import migrate
    from nereus.cli.mutation.options import identity
    from nereus.cli.output import shown

    env: Env = ctx.obj
    who = identity(operator, reason, None, None)
    source_store = cluster_store(env, coordinator, security=CoordinatorSecurity())
    with source_store as source, cluster_store(env, to, create=True) as target:
        preview = migrate(source.handle, target.handle, operator=who.operator,
                          reason=who.reason, now_ms=now_ms(), dry_run=True)
        if not dry_run:
            if not yes:
                from nereus.cli.mutation.confirmation import ask

                ask(f"copy cluster {preview.cluster} ({preview.records} records) from "
                    f"{preview.source} to {preview.target}, and mark it moved there")
            preview = migrate(source.handle, target.handle, operator=who.operator,
                              reason=who.reason, now_ms=now_ms())
    report = _report(preview, operator=who.operator, reason=who.reason)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_migrate(out, shown(report)))


def _report(done: Migration, *, operator: str, reason: str) -> ClusterMigrateReport:
    from nereus.cli.commands.cluster.documents import (
        ClusterMigrateReport,
        KindCount,
        ShardEpochRow,
    )

    return ClusterMigrateReport(
        cluster=done.cluster, source=done.source, target=done.target,
        result="DRY_RUN" if done.dry_run else "MIGRATED", records=done.records,
        kinds=[KindCount(kind=kind, records=n) for kind, n in done.kinds.items()],
        epochs=[ShardEpochRow(shard=shard.replace(":", "/"), epoch=epoch)
                for shard, epoch in done.epochs.items()],
        replaced=done.replaced, recopied=done.recopied, operator=operator, reason=reason)


def _print_migrate(out: Console, report: ClusterMigrateReport) -> None:
    verb = "would copy" if report.result == "DRY_RUN" else "copied"
    kinds = ", ".join(f"{k.kind} {k.records}" for k in report.kinds) or "nothing"
    out.print(f"{verb} cluster {report.cluster} from {report.source} to {report.target}: "
              f"{report.records} records ({kinds})")
    if report.replaced:
        out.print(f"  replacing what {report.target} held: {report.replaced}")
    if report.epochs:
        top = max(report.epochs, key=lambda row: row.epoch)
        out.print(f"  {len(report.epochs)} shard epoch counters (highest {top.epoch}, "
                  f"{top.shard}): each shard activates above its own")
    if report.recopied:
        out.print(f"  {report.recopied} records changed at {report.source} meanwhile: "
                  "copied again")
    if report.result == "MIGRATED":
        out.print(f"  {report.source} is marked moved: no node starts there again\n"
                  f"  in each node's home: nereus cluster rejoin --to {report.target}; "
                  "then nereus engine start")


@takes_coordinator_security
def cluster_rejoin(
    ctx: typer.Context,
    to: ToOpt,
    dry_run: DryRunOpt = False,
) -> None:
    """Make this home's node join the cluster at another coordinator, after `cluster
    migrate` copied the cluster there.

    Rewrites the line `[cluster] coordinator` of the home's nereus.toml, and with the TLS
    and auth options its lines of those settings (everything else is kept), after checking
    that the engine is stopped, that URL holds a whole copy of the cluster this home named
    (reached as the engine will reach it), and that the node is not running there already.
    `nereus engine start` then joins there."""
    import msgspec

    from nereus.adapters.cluster.home_config import with_coordinator
    from nereus.adapters.cluster.migration import check_rejoin, same_place
    from nereus.cli.commands.cluster.documents import ClusterRejoinReport
    from nereus.cli.output import shown
    from nereus.config import parse_config
    from nereus.errors import NereusError, UsageError

    env: Env = ctx.obj
    path = env.layout.config
    if not path.exists():
        raise UsageError(f"{path} does not exist: this is not a node's home",
                         hint="run it with --home HOME of a node (`nereus init --join` made "
                              "it)")
    text = path.read_text()
    local = parse_config(text, source=str(path))
    if local.cluster is None:
        raise UsageError(f"{path} has no [cluster] table: this home is no cluster node",
                         hint="`nereus init --join URL --node-id ID` makes a node's home")
    previous, node_id = local.cluster.coordinator, local.cluster.node_id
    if env.engine_running():
        raise NereusError(f"the engine of {env.home} runs (node {node_id} at {previous})",
                          hint="stop it first: nereus engine stop")
    planned = _with_security(text, source=str(path))
    reach = _settings_for(planned, to, source=str(path))
    security = CoordinatorSecurity.of(reach, home=path.parent)
    with cluster_store(env, to, security=security) as store:
        url, cluster = store.url, store.handle.cluster
        unchanged = same_place(previous, url)
        if not unchanged:
            check_rejoin(store, previous, node_id)
    result: RejoinResult = "UNCHANGED" if unchanged else "DRY_RUN" if dry_run \
        else "REJOINED"
    if result == "REJOINED":
        rewritten = with_coordinator(planned, url, source=str(path))
        tmp = path.with_suffix(".toml.tmp")
        tmp.write_text(rewritten)
        tmp.chmod(path.stat().st_mode & 0o777)
        tmp.replace(path)
    report = ClusterRejoinReport(home=str(env.home), config=str(path), node_id=node_id,
                                 cluster=cluster, coordinator=url, previous=previous,
                                 result=result)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_rejoin(out, shown(report)))


def _settings_for(text: str, url: str, *, source: str) -> ClusterSettings:
    """The ``[cluster]`` that ``text`` would be with coordinator ``url``. When the home's
    settings do not fit it (an etcd user for Oxia), ``ConfigError`` says to give ``url``'s
    as options, which replace them."""
    from nereus.adapters.cluster.home_config import with_coordinator
    from nereus.config import parse_config
    from nereus.errors import ConfigError

    rewritten = with_coordinator(text, url, source=source, check=False)
    try:
        cluster = parse_config(rewritten, source=source).cluster
    except ConfigError as exc:
        raise ConfigError(f"this home's [cluster] settings do not fit {url}: {exc.message}",
                          hint=f"give {url}'s settings as options (--tls-ca-file, "
                               "--tls-cert-file, --tls-key-file; etcd: --username with "
                               "--password-file): they replace the home's") from None
    assert cluster is not None
    return cluster


def _with_security(text: str, *, source: str) -> str:
    """A node's nereus.toml with the running command's TLS and auth options as its
    ``[cluster]`` settings of those names (all of them replaced), or as it is without."""
    from nereus.adapters.cluster.home_config import with_cluster_lines
    from nereus.cli.commands.cluster.coordinator_security import SETTINGS, given_security

    given = given_security()
    if given is None or not given.given:
        return text
    return with_cluster_lines(text, SETTINGS, given.toml(), source=source)


def _print_rejoin(out: Console, report: ClusterRejoinReport) -> None:
    if report.result == "UNCHANGED":
        out.print(f"node {report.node_id} names {report.coordinator} already")
    elif report.result == "DRY_RUN":
        out.print(f"would make node {report.node_id} join cluster {report.cluster} there "
                  f"instead of {report.previous} ({report.config})")
    else:
        out.print(f"node {report.node_id} joins cluster {report.cluster} at "
                  f"{report.coordinator} now (it named {report.previous}); {report.config} "
                  "rewritten\n  `nereus engine start` joins there")

