"""The cluster screen's view models: one read of the coordinator's records turned into
frozen rows (pure functions; the shard states follow ``nereus.cluster.status``).

A node is listed by the id its operator gave it (its worker processes ``<id>-w<K>`` count
as it) while anything names it: its member record (``alive``), a shard it owns, a
placement or a drain. A shard is listed when the cluster's configuration has it or a
record names it; the ones in motion (MOVING, RECOVERING) are also the moves table's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from nereus.cluster.names import node_of
from nereus.cluster.status import IN_MOTION, ShardState, configured_shards, node_facts, shard_state
from nereus.errors import NereusError
from nereus.shard import ShardId
from nereus.tui.cluster_source import ClusterReading


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRow:
    """One node as the cluster screen shows it."""

    node_id: str
    alive: bool
    address: str | None
    host: str | None
    capacity: int | None
    draining: bool
    leader: bool
    this_node: bool
    shards: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.node_id


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnershipRow:
    """One shard: who owns it, at which epoch, in which state, and where it is placed."""

    shard: str
    owner: str | None
    epoch: int | None
    state: ShardState
    placed_on: str | None
    pinned: bool
    detail: str

    @property
    def key(self) -> str:
        return self.shard

    @property
    def in_motion(self) -> bool:
        return self.state in IN_MOTION


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterOverview:
    cluster: str
    coordinator: str
    leader: str | None
    this_node: str | None
    config_revision: int | None
    config_problem: str | None  # the configuration did not parse: only recorded shards shown
    nodes: tuple[NodeRow, ...]
    shards: tuple[OwnershipRow, ...]

    @property
    def moves(self) -> tuple[OwnershipRow, ...]:
        return tuple(row for row in self.shards if row.in_motion)

    def count(self, state: ShardState) -> int:
        return sum(1 for row in self.shards if row.state == state)


def node_rows(reading: ClusterReading, this_node: str | None) -> tuple[NodeRow, ...]:
    view = reading.view
    return tuple(NodeRow(node_id=f.node_id, alive=f.alive,
                         address=None if f.member is None else f.member.address,
                         host=None if f.member is None else f.member.host,
                         capacity=None if f.member is None else f.member.capacity,
                         draining=f.draining, leader=f.leader,
                         this_node=f.node_id == this_node, shards=f.shards)
                 for f in node_facts(view.members, view.owners, view.placements, view.drains,
                                     view.leader))


def _named(member_id: str) -> str:
    """A member by its node's given id, a worker beside it: ``n2 (n2-w1)``."""
    node = node_of(member_id)
    return node if node == member_id else f"{node} ({member_id})"


def ownership_rows(reading: ClusterReading,
                   configured: list[ShardId]) -> tuple[OwnershipRow, ...]:
    view = reading.view
    rows = []
    for shard in sorted({*configured, *view.placements, *view.owners}):
        owner, placement = view.owners.get(shard), view.placements.get(shard)
        rows.append(OwnershipRow(
            shard=str(shard), owner=None if owner is None else _named(owner.node_id),
            epoch=None if owner is None else owner.epoch, state=shard_state(owner, placement),
            placed_on=None if placement is None else _named(placement.node_id),
            pinned=placement is not None and placement.pinned,
            detail="" if owner is None else owner.detail))
    return tuple(rows)


def build_cluster_overview(reading: ClusterReading, *,
                           this_node: str | None) -> ClusterOverview:
    config = reading.view.config
    configured: list[ShardId] = []
    problem = None
    if config is not None:
        try:
            configured = configured_shards(
                config.toml, source=f"the cluster's configuration r{config.revision}")
        except NereusError as exc:
            problem = exc.message
    leader = reading.view.leader
    return ClusterOverview(
        cluster=reading.cluster, coordinator=reading.coordinator,
        leader=None if leader is None else node_of(leader.node_id), this_node=this_node,
        config_revision=None if config is None else config.revision, config_problem=problem,
        nodes=node_rows(reading, this_node), shards=ownership_rows(reading, configured))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterPanel:
    """What the cluster screen knows: the last overview read and whether reads succeed."""

    overview: ClusterOverview | None = None
    connected: bool = False
    problem: str | None = None
    hint: str | None = None
    failures: int = 0  # consecutive failed reads


def with_overview(overview: ClusterOverview) -> ClusterPanel:
    return ClusterPanel(overview=overview, connected=True)


def with_failure(panel: ClusterPanel, problem: str, hint: str | None) -> ClusterPanel:
    """A read failed: keep the last overview (shown as stale), count the failure."""
    return ClusterPanel(overview=panel.overview, connected=False, problem=problem, hint=hint,
                        failures=panel.failures + 1)
