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
from nereus.cluster.status import configured_shards, node_facts, shard_state
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
    return [NodeRow(node_id=f.node_id, alive=f.alive,
                    address=None if f.member is None else f.member.address,
                    host=None if f.member is None else f.member.host,
                    capacity=None if f.member is None else f.member.capacity,
                    draining=f.draining, leader=f.leader, shards=list(f.shards))
            for f in node_facts(view.members, view.owners, view.placements, view.drains,
                                view.leader)]


def cluster_status(view: ClusterView, *, cluster: str, coordinator: str) -> ClusterStatus:
    shards = [] if view.config is None else configured_shards(
        view.config.toml, source=f"the cluster's configuration r{view.config.revision}")
    return ClusterStatus(
        cluster=cluster, coordinator=coordinator,
        leader=None if view.leader is None else view.leader.node_id,
        nodes=node_rows(view), shards=shard_rows(view, shards))
