"""The cluster as ``cluster status`` shows it: a function of the records read
(``ClusterView``) and of what is known of each owner now (``OwnerHealth``), so its rules
are testable without a coordinator.

A shard's state follows ``nereus.cluster.status`` (the rules the dashboard's cluster
screen shows too): OWNER_LOST when its owner is known gone while its record lives, with
the time its lease has left.

Nodes are named by the id their operator gave them (``nereus.cluster.names``): a node run
as worker processes is one row, its workers under it; a shard's owner and placement name
the node, and the worker beside it. A node is ``alive`` while it (or a worker of it) has a
member record; a node named only by placements, ownership records or a drain is listed
too, not alive (gone, or not yet joined). Each live node shows which keys it said it holds
(``NodeKeys``: its sealing keys' fingerprints, each route's evidence key generation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from nereus.adapters.cluster.cluster_store import ClusterView
from nereus.adapters.cluster.liveness import OwnerHealth
from nereus.cli.commands.cluster.documents import ClusterStatus, NodeRow, ShardRow, WorkerRow
from nereus.cluster.names import node_of
from nereus.cluster.records import NodeKeys
from nereus.cluster.status import configured_shards, node_facts, shard_state
from nereus.shard import ShardId


def _worker(member_id: str | None) -> str | None:
    return None if member_id is None or node_of(member_id) == member_id else member_id


def shard_rows(view: ClusterView, shards: list[ShardId],
               health: Mapping[ShardId, OwnerHealth] | None = None) -> list[ShardRow]:
    every = sorted({*shards, *view.placements, *view.owners})
    rows: list[ShardRow] = []
    for shard in every:
        owner, placement = view.owners.get(shard), view.placements.get(shard)
        known = None if owner is None or health is None else health.get(shard)
        lost = known is not None and known.lost
        detail = known.why if lost and known is not None else \
            (owner.detail or None) if owner is not None else None
        rows.append(ShardRow(
            shard=str(shard), owner=None if owner is None else node_of(owner.node_id),
            owner_worker=None if owner is None else _worker(owner.node_id),
            epoch=None if owner is None else owner.epoch,
            state=shard_state(owner, placement, owner_lost=lost),
            placed_on=None if placement is None else node_of(placement.node_id),
            placed_on_worker=None if placement is None else _worker(placement.node_id),
            pinned=placement is not None and placement.pinned,
            lease_left_ms=None if known is None else known.lease_left_ms, detail=detail))
    return rows


def node_rows(view: ClusterView, held: Mapping[str, NodeKeys] | None = None
              ) -> list[NodeRow]:
    """Every node; ``held``: which keys each member said it holds (by member id)."""
    said = held or {}
    rows: list[NodeRow] = []
    for f in node_facts(view.members, view.owners, view.placements, view.drains, view.leader):
        workers = [WorkerRow(worker_id=w.worker_id, alive=w.alive,
                             pid=None if w.member is None else w.member.pid,
                             address=None if w.member is None else w.member.address,
                             draining=w.draining, shards=list(w.shards),
                             **_keys(said.get(w.worker_id) if w.alive else None))
                   for w in f.workers]
        own = said.get(f.node_id) or next((said[w.worker_id] for w in f.workers
                                           if w.alive and w.worker_id in said), None)
        rows.append(NodeRow(node_id=f.node_id, alive=f.alive, address=f.address,
                            host=None if f.member is None else f.member.host,
                            capacity=None if f.member is None else f.member.capacity,
                            draining=f.draining, leader=f.leader, shards=list(f.shards),
                            workers=workers, **_keys(own if f.alive else None)))
    return rows


class _HeldKeys(TypedDict):
    """The key fields of a NodeRow or WorkerRow: what the member said it holds."""

    seal_key_ids: list[str] | None
    evidence_key_generations: dict[str, int] | None


def _keys(report: NodeKeys | None) -> _HeldKeys:
    if report is None:
        return {"seal_key_ids": None, "evidence_key_generations": None}
    return {"seal_key_ids": list(report.seal_key_ids),
            "evidence_key_generations": dict(report.generations)}


def cluster_status(view: ClusterView, *, cluster: str, coordinator: str,
                   health: Mapping[ShardId, OwnerHealth] | None = None,
                   held: Mapping[str, NodeKeys] | None = None) -> ClusterStatus:
    shards = [] if view.config is None else configured_shards(
        view.config.toml, source=f"the cluster's configuration r{view.config.revision}")
    return ClusterStatus(
        cluster=cluster, coordinator=coordinator,
        leader=None if view.leader is None else node_of(view.leader.node_id),
        nodes=node_rows(view, held), shards=shard_rows(view, shards, health))
