"""``nereus cluster``: the cluster's configuration, its nodes and shards, and drains.

The group is put together here: the configuration (``configure.py``: init, config), what
the coordinator says now (status, nodes, below) and drains (``moves.py``, where ``nereus
shard move`` lives too; it is added to the shard group in ``nereus.cli.main``). Every
command reaches the cluster through ``--coordinator URL`` or the home's ``[cluster]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from nereus.cli.commands.cluster import configure, moves
from nereus.cli.commands.cluster.access import CoordinatorOpt, cluster_store
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.commands.cluster.documents import ClusterStatus, NodeRow

app = typer.Typer(help="The cluster: configuration, nodes, shard ownership, drains.",
                  no_args_is_help=True)
app.command("init")(configure.cluster_init)
app.command("config")(configure.cluster_config)


def _status(env: Env, coordinator: str | None) -> ClusterStatus:
    from nereus.cli.commands.cluster.status_view import cluster_status

    with cluster_store(env, coordinator) as store:
        store.require_config()
        view = store.snapshot()
        return cluster_status(view, cluster=store.handle.cluster, coordinator=store.url)


@app.command("status")
def status(ctx: typer.Context, coordinator: CoordinatorOpt = None) -> None:
    """The leader, every node (alive or not) and every shard: its owner, fencing epoch,
    state (ACTIVE, RECOVERING, MOVING, FAILED or UNOWNED) and placement."""
    import msgspec

    from nereus.cli.output import shown

    env: Env = ctx.obj
    report = _status(env, coordinator)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_status(out, shown(report)))


@app.command("nodes")
def nodes(ctx: typer.Context, coordinator: CoordinatorOpt = None) -> None:
    """Every node: alive (a member record), address, capacity, draining, the shards it owns."""
    import msgspec

    from nereus.cli.output import shown

    env: Env = ctx.obj
    report = _status(env, coordinator)
    env.output.emit(msgspec.to_builtins(report.nodes),
                    lambda out: _print_nodes(out, shown(report).nodes))


app.command("drain")(moves.cluster_drain)
app.command("undrain")(moves.cluster_undrain)


def _print_status(out: Console, report: ClusterStatus) -> None:
    from rich.table import Table

    out.print(f"cluster {report.cluster} at {report.coordinator}; leader: "
              f"{report.leader or 'none'}")
    _print_nodes(out, report.nodes)
    table = Table("shard", "state", "owner", "epoch", "placed on", title="shards")
    for row in report.shards:
        placed = (row.placed_on or "-") + (" (pinned)" if row.pinned else "")
        table.add_row(row.shard, row.state, row.owner or "-",
                      "-" if row.epoch is None else str(row.epoch), placed)
    out.print(table)


def _print_nodes(out: Console, rows: list[NodeRow]) -> None:
    from rich.table import Table

    table = Table("node", "alive", "host", "address", "capacity", "shards", title="nodes")
    for row in rows:
        flags = [word for word, on in (("leader", row.leader), ("draining", row.draining)) if on]
        table.add_row(row.node_id + (f" ({', '.join(flags)})" if flags else ""),
                      "yes" if row.alive else "no", row.host or "-", row.address or "-",
                      "-" if row.capacity is None else str(row.capacity),
                      ", ".join(row.shards) or "-")
    out.print(table)
