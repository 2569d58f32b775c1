"""What the leader does: compute the placement of every shard over the live nodes and
write what changed (``nereus.cluster.placement``). Each write is a CAS on the version it
read, so a leader that lost its record (and a new one already writing) cannot undo the
new leader's decisions with stale ones: at most one of them wins each key. A placement of
a shard the configuration no longer has (a home's ``partitions`` set back after a start
with more) is deleted, so no node takes it."""

from __future__ import annotations

from collections.abc import Sequence

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.cluster.names import node_of
from nereus.cluster.placement import Assignment, plan_placement
from nereus.cluster.records import Placement
from nereus.coordination.errors import UnexpectedVersionId
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.shard import ShardId


def place_shards(store: ClusterStore, shards: Sequence[ShardId], *, now_ms: int,
                 events: EventLog) -> int:
    """Write the placements that differ from the desired ones; how many were written."""
    members = store.members()
    drained = store.drains()  # a drain names a node: its workers are drained with it
    drains = frozenset({*drained, *(m for m in members if node_of(m) in drained)})
    placed = store.placements()
    current = {shard: Assignment(p.node_id, p.reason, p.pinned)
               for shard, (p, _) in placed.items()}
    desired = plan_placement(shards, {node: m.capacity for node, m in members.items()},
                             current, drains)
    written = 0
    configured = set(shards)
    for shard, (stale, stale_version) in sorted(placed.items(), key=lambda item: str(item[0])):
        if shard not in configured and store.unplace(shard, stale_version):
            safe_event(events, "shard_unplaced", shard=str(shard), node_id=stale.node_id,
                       reason="not a shard of the configuration")
    for shard, assignment in sorted(desired.items(), key=lambda item: str(item[0])):
        before = current.get(shard)
        if before is not None and before.node_id == assignment.node_id:
            continue
        placement = Placement(shard=str(shard), node_id=assignment.node_id,
                              reason=assignment.reason, pinned=assignment.pinned,
                              since_ms=now_ms)
        version = placed[shard][1] if shard in placed else None
        try:
            store.place(shard, placement, expected=version)
        except UnexpectedVersionId:
            continue  # changed meanwhile (an operator's move): the next round sees it
        written += 1
        safe_event(events, "shard_placed", shard=str(shard), node_id=assignment.node_id,
                   previous=None if before is None else before.node_id,
                   reason=assignment.reason)
    return written
