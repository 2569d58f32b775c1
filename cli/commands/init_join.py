"""``nereus init --join URL --node-id ID``: a cluster node's home.

Its nereus.toml holds only ``[cluster]`` (the coordinator, the node id, its capacity): the
routes, lanes, shard limits, object store and checkpoints are the cluster's, read from the
coordinator whenever the home's configuration is loaded. The home is otherwise like any
other (private, with its outbox), and it receives each route's evidence key from the
coordinator, so all nodes sign and check destination evidence with the same key.

The cluster must have a configuration (``nereus cluster init``), and no live node may hold
the id already. A secured coordinator is reached with ``--tls-ca-file`` and the other
options of ``cluster/coordinator_security.py``, which are written into the node's
``[cluster]`` too.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.cli.commands.cluster.coordinator_security import CoordinatorSecurity
    from nereus.cli.commands.cluster.documents import InitJoinReport
    from nereus.config import Config

JoinOpt = Annotated[str | None, typer.Option(
    "--join", metavar="URL", help="Make this home a node of the cluster at URL "
    "(oxia://HOST:PORT/CLUSTER, etcd://HOST:PORT/CLUSTER or "
    "sqlite:///ABSOLUTE/PATH.db/CLUSTER): its nereus.toml "
    "holds only [cluster]; routes, lanes and the rest are the cluster's.")]
NodeIdOpt = Annotated[str | None, typer.Option(
    "--node-id", metavar="ID", help="With --join: this node's id, unique in the cluster.")]
CapacityOpt = Annotated[int, typer.Option(
    min=0, max=1000, help="With --join: this node's placement weight (0: no shards).")]

# the options that make a standalone home's routes; a node's come from the cluster
_STANDALONE = {"route": "--route", "partitions": "--partitions", "log": "--log",
               "from_home": "--from", "copy_log": "--copy-log", "attach": "--attach"}
_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def standalone_options(ctx: typer.Context) -> list[str]:
    return [flag for name, flag in _STANDALONE.items() if given(ctx, name)]


def joined(ctx: typer.Context, url: str | None, node_id: str | None, capacity: int, *,
           force: bool, security: CoordinatorSecurity) -> bool:
    """``init`` with --join (or --node-id, --capacity, or the coordinator's TLS and auth
    options): the node's home is written."""
    if url is None and node_id is None and not given(ctx, "capacity") and not security.given:
        return False
    init_join(ctx.obj, url, node_id, capacity, force=force, standalone=standalone_options(ctx),
              security=security)
    return True


def render_node_config(*, coordinator: str, node_id: str, capacity: int,
                       security: str = "") -> str:
    """The nereus.toml ``init --join`` writes (TOML basic strings are JSON's); ``security``:
    the ``[cluster]`` lines of the coordinator's TLS and auth options."""
    return f"""# Nereus Delay node configuration (written by `nereus init --join`).
# Routes, lanes, shard limits, the object store and checkpoints are the cluster's, in its
# coordinator: `nereus cluster config` shows them. This file keeps the node's own settings.

[cluster]
coordinator = {json.dumps(coordinator)}
node_id = {json.dumps(node_id)}
capacity = {capacity}  # placement weight (0: this node owns no shard)
{security}# session_ttl_ms = 10000  # a dead node's shards move after this long
# lease_margin_ms = 2000  # no producer call once the session is this close to its end
# host = ""  # how other hosts reach this node (default: the host name)
# the cluster's sealing key, the same file on every node (feature level 2 keeps the routes'
# evidence keys sealed under it; 64 hex digits, mode 0600): openssl rand -hex 32
# evidence_seal_key_file = "/etc/nereus/evidence-seal.key"

# [engine]  # this node's engine settings, as in a standalone home
"""


def init_join(env: Env, url: str | None, node_id: str | None, capacity: int, *, force: bool,
              standalone: list[str], security: CoordinatorSecurity) -> None:
    """Write the node's home (see the module's docstring)."""
    import msgspec

    from nereus.adapters.cluster.home_config import check_node_text
    from nereus.cli.output import shown
    from nereus.config import parse_config
    from nereus.errors import NereusError, UsageError

    if url is None or node_id is None:
        raise UsageError("--node-id, --capacity and the coordinator's --tls-*, --username "
                         "and --password-* go with --join URL, and --join needs --node-id ID",
                         hint="nereus init --join URL --node-id ID [--capacity N] "
                              "[--tls-ca-file PATH ...]")
    if standalone:
        raise UsageError(f"{', '.join(standalone)} cannot go with --join: a node's routes, "
                         "partitions and logs are the cluster's configuration",
                         hint="change them in the cluster (`nereus cluster init --replace`), "
                              "or init a standalone home without --join")
    if not _NODE_ID.match(node_id):
        raise UsageError(f"invalid node id {node_id!r}", hint="use 1-64 characters from "
                         "A-Z a-z 0-9 . _ - starting with a letter or digit")
    from nereus.cluster.names import looks_like_worker, node_of

    if looks_like_worker(node_id):
        raise UsageError(f"node id {node_id!r} ends like a worker process's id: a node run "
                         f"with --workers N is shown as {node_of(node_id)!r} with its workers "
                         f"{node_of(node_id)}-w0, {node_of(node_id)}-w1, ...",
                         hint="choose an id that does not end in -w<digits>")
    layout = env.layout
    if layout.config.exists() and not force:
        raise NereusError(f"{layout.config} already exists",
                          hint="pass --force to overwrite it (existing shard logs and state "
                               "are kept)")
    text = render_node_config(coordinator=url, node_id=node_id, capacity=capacity,
                              security=security.toml())
    check_node_text(text, source=str(layout.config))
    parse_config(text, source=str(layout.config))
    from nereus.cli.commands.cluster.access import cluster_store

    with cluster_store(env, url, security=security) as store:
        shared = _cluster_config(store, node_id)
        report = _write_home(env, store, text, shared, node_id=node_id, capacity=capacity)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print(out, shown(report)))


def _cluster_config(store: ClusterStore, node_id: str) -> tuple[Config, int]:
    """The cluster's configuration (and revision), if ``node_id`` is free: no live node
    runs under it, as one process or as its workers (``<node_id>-w<K>``)."""
    from nereus.cluster.errors import NodeIdInUse
    from nereus.config import parse_config
    from nereus.engine.hosting.workers.home import describe_member, live_namesakes

    record = store.require_config()
    taken = live_namesakes(store.members(), node_id)
    if taken:
        raise NodeIdInUse(taken[0].node_id, describe_member(taken[0]))
    config = parse_config(record.toml,
                          source=f"the cluster's configuration r{record.revision}")
    return config, record.revision


def _write_home(env: Env, store: ClusterStore, text: str, shared: tuple[Config, int], *,
                node_id: str, capacity: int) -> InitJoinReport:
    from nereus.adapters.cluster.route_keys import install_route_keys, share_route_keys
    from nereus.adapters.home.private_files import secure_home
    from nereus.cli.commands.cluster.access import now_ms
    from nereus.cli.commands.cluster.documents import InitJoinReport
    from nereus.cli.commands.init import refuse_route_changes
    from nereus.cli.mutation.options import identity

    config, revision = shared
    layout = env.layout
    refuse_route_changes(env, config.routes)
    layout.root.mkdir(parents=True, exist_ok=True)
    secure_home(layout.root)
    layout.outbox.mkdir(exist_ok=True)
    # a cluster configured before its routes had keys in the coordinator gets them now
    share_route_keys(store, config.routes, now_ms=now_ms(),
                     made_by=identity(None, "init --join", None, None).operator)
    # a sealed key (feature level 2) is opened by the engine at start, with the node's
    # sealing key
    written = install_route_keys(store, layout.root, config.routes, sealed_required=False)
    tmp = layout.config.with_suffix(".toml.tmp")
    tmp.write_text(text)
    tmp.replace(layout.config)
    return InitJoinReport(
        home=str(layout.root), config=str(layout.config), coordinator=store.url,
        cluster=store.handle.cluster, node_id=node_id, capacity=capacity, revision=revision,
        shards=[f"{r.name}/{p}" for r in config.routes.values() for p in range(r.partitions)],
        evidence_keys=written)


def _print(out: Console, report: InitJoinReport) -> None:
    out.print(f"wrote {report.config}: node {report.node_id} (capacity {report.capacity}) of "
              f"cluster {report.cluster} at {report.coordinator}\n"
              f"  the cluster's configuration r{report.revision}: "
              f"{len(report.shards)} shard(s)\n"
              + (f"  evidence keys of {', '.join(report.evidence_keys)} written here\n"
                 if report.evidence_keys else "")
              + "  `nereus engine start` joins the cluster")
