"""The cluster as ``cluster status`` shows it: a function of the records read
(``ClusterView``), so its rules are testable without a coordinator.

A shard's state follows ``nereus.cluster.status`` (the rules the dashboard's cluster
screen shows too).

A node is ``alive`` while it has a member record; a node named only by placements,
ownership records or a drain is listed too, not alive (gone, or not yet joined).
"""

from __future__ import annotations

from nereus.adapters.cluster.store import ClusterView
from nereus.cli.commands.cluster.documents import ClusterStatus, NodeRow, ShardRow
from nereus.cluster.status import configured_shards, shard_state
from nereus.shard import ShardId


def shard_rows(view: ClusterView, shards: list[ShardId]) -> list[ShardRow]:
    every = sorted({*shards, *view.placements, *view.owners})
    rows: list[ShardRow] = []
    for shard in every:
        owner, placement = view.owners.get(shard), view.placements.get(shard)
        rows.append(ShardRow(
            shard=str(shard), owner=None if owner is None else owner.node_id,
            epoch=None if owner is None else owner.epoch, state=shard_state(owner, placement),
            placed_on=None if placement is None else placement.node_id,
            pinned=placement is not None and placement.pinned))
    return rows


def node_rows(view: ClusterView) -> list[NodeRow]:
    owned: dict[str, list[str]] = {}
    for shard, owner in sorted(view.owners.items()):
        owned.setdefault(owner.node_id, []).append(str(shard))
    named = {*view.members, *owned, *view.drains,
             *(p.node_id for p in view.placements.values())}
    leader = None if view.leader is None else view.leader.node_id
    rows: list[NodeRow] = []
    for node in sorted(named):
        member = view.members.get(node)
        rows.append(NodeRow(
            node_id=node, alive=member is not None,
            address=None if member is None else member.address,
            host=None if member is None else member.host,
            capacity=None if member is None else member.capacity,
            draining=node in view.drains, leader=node == leader,
            shards=owned.get(node, [])))
    return rows


def cluster_status(view: ClusterView, *, cluster: str, coordinator: str) -> ClusterStatus:
    shards = [] if view.config is None else configured_shards(
        view.config.toml, source=f"the cluster's configuration r{view.config.revision}")
    return ClusterStatus(
        cluster=cluster, coordinator=coordinator,
        leader=None if view.leader is None else view.leader.node_id,
        nodes=node_rows(view), shards=shard_rows(view, shards))
