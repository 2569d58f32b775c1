"""``nereus cluster``: the cluster's configuration, its nodes and shards, and drains.

The group is put together here: the configuration (``configure.py``: init, config), what
the coordinator says now (status, nodes, below), drains (``moves.py``, where ``nereus
shard move`` lives too; it is added to the shard group in ``nereus.cli.main``) and the
move to another coordinator (``migrate.py``: migrate, rejoin); the routes' evidence keys
(``rotate_key.py``: rotate-evidence-key) and their sealing key (``reseal_key.py``:
reseal-evidence-keys). Every command reaches the cluster through
``--coordinator URL`` or the home's ``[cluster]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from nereus.cli.commands.cluster import configure, migrate, moves, reseal_key, rotate_key
from nereus.cli.commands.cluster.access import CoordinatorOpt, cluster_store
from nereus.cli.commands.cluster.coordinator_security import takes_coordinator_security
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.commands.cluster.documents import ClusterStatus, NodeRow

app = typer.Typer(help="The cluster: configuration, nodes, shard ownership, drains.",
                  no_args_is_help=True)
app.command("init")(configure.cluster_init)
app.command("config")(configure.cluster_config)


def _status(env: Env, coordinator: str | None) -> ClusterStatus:
    from nereus.adapters.cluster.liveness import owner_health
    from nereus.adapters.cluster.sealed_keys import node_key_reports
    from nereus.cli.commands.cluster.status_view import cluster_status

    with cluster_store(env, coordinator) as store:
        store.require_config()
        view = store.snapshot()
        # what is known of each owner now, for the records just read (the same owner)
        owned = {shard: found for shard, found in store.owners().items()
                 if view.owners.get(shard) == found.record}
        health = owner_health(store, owned, view.members)
        return cluster_status(view, cluster=store.handle.cluster, coordinator=store.url,
                              health=health, held=node_key_reports(store))


@app.command("status")
@takes_coordinator_security
def status(ctx: typer.Context, coordinator: CoordinatorOpt = None) -> None:
    """The leader, every node (by the id it was given, its worker processes under it;
    alive or not) and every shard: its owner, fencing epoch, state (ACTIVE, RECOVERING,
    MOVING, FAILED, OWNER_LOST with the time its owner's lease has left, or UNOWNED) and
    placement."""
    import msgspec

    from nereus.cli.output import shown

    env: Env = ctx.obj
    report = _status(env, coordinator)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print_status(out, shown(report)))


@app.command("nodes")
@takes_coordinator_security
def nodes(ctx: typer.Context, coordinator: CoordinatorOpt = None) -> None:
    """Every node by the id it was given: alive (a member record), address, capacity,
    draining, the shards it owns, and its worker processes (`--workers N`)."""
    import msgspec

    from nereus.cli.output import shown

    env: Env = ctx.obj
    report = _status(env, coordinator)
    env.output.emit(msgspec.to_builtins(report.nodes),
                    lambda out: _print_nodes(out, shown(report).nodes))


app.command("drain")(moves.cluster_drain)
app.command("undrain")(moves.cluster_undrain)
app.command("migrate")(migrate.cluster_migrate)
app.command("rejoin")(migrate.cluster_rejoin)
app.command("rotate-evidence-key")(rotate_key.rotate_evidence_key)
app.command("reseal-evidence-keys")(reseal_key.reseal_evidence_keys)


def _print_status(out: Console, report: ClusterStatus) -> None:
    from rich.table import Table

    out.print(f"cluster {report.cluster} at {report.coordinator}; leader: "
              f"{report.leader or 'none'}")
    _print_nodes(out, report.nodes)
    table = Table("shard", "state", "owner", "epoch", "placed on", title="shards")
    for row in report.shards:
        placed = _named(row.placed_on, row.placed_on_worker) + (" (pinned)" if row.pinned
                                                                else "")
        state: str = row.state
        if row.state == "OWNER_LOST":
            state += (" (lease expiring"
                      + ("" if row.lease_left_ms is None
                         else f", {row.lease_left_ms / 1000:.1f} s left") + ")")
        table.add_row(row.shard, state, _named(row.owner, row.owner_worker),
                      "-" if row.epoch is None else str(row.epoch), placed)
    out.print(table)
    for row in report.shards:
        if row.detail and row.state in ("OWNER_LOST", "FAILED"):
            out.print(f"[yellow]![/yellow] {row.shard} {row.state}: {row.detail}")


def _named(node: str | None, worker: str | None) -> str:
    """A node, and its worker beside it: ``n2 (n2-w1)``."""
    return "-" if node is None else node + (f" ({worker})" if worker else "")


def _print_nodes(out: Console, rows: list[NodeRow]) -> None:
    from rich.table import Table

    table = Table("node", "alive", "host", "address", "capacity", "shards", "keys",
                  title="nodes")
    for row in rows:
        flags = [word for word, on in (("leader", row.leader), ("draining", row.draining)) if on]
        table.add_row(row.node_id + (f" ({', '.join(flags)})" if flags else ""),
                      "yes" if row.alive else "no", row.host or "-", row.address or "-",
                      "-" if row.capacity is None else str(row.capacity),
                      ", ".join(row.shards) or "-",
                      _held(row.seal_key_ids, row.evidence_key_generations))
        for worker in row.workers:
            table.add_row(f"  └ {worker.worker_id}" + (" (draining)" if worker.draining
                                                         and not row.draining else ""),
                          "yes" if worker.alive else "no", "",
                          worker.address or "-" if worker.pid is None
                          else f"pid {worker.pid}, {worker.address}", "",
                          ", ".join(worker.shards) or "-",
                          _held(worker.seal_key_ids, worker.evidence_key_generations))
    out.print(table)


def _held(seal_key_ids: list[str] | None, generations: dict[str, int] | None) -> str:
    """Which keys a node holds: ``seal 1a2b... (+ 3c4d...); default g2``."""
    if seal_key_ids is None or generations is None:
        return "-"
    seal = "seal " + (seal_key_ids[0] + "".join(f" (+ {k})" for k in seal_key_ids[1:])
                      if seal_key_ids else "none")
    return "; ".join([seal] + [f"{route} g{gen}" for route, gen in sorted(generations.items())])
