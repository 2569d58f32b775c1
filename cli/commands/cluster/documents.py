"""What the cluster commands print with ``--json``, as typed values (``nereus cluster
init|config|status|nodes|drain|undrain``, ``nereus shard move``, ``nereus init --join``).

The man pages' JSON sections come from these fields (``nereus.cli.json_keys.typed``) and
``tests/cli/test_typed_documents.py`` holds each command's output to them.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from nereus.cluster.status import ShardState


class ClusterRoute(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A route of the cluster's configuration."""

    route: str
    log: str
    partitions: int
    route_id: str


class ClusterLane(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    lane: str
    destination: str


class ClusterInitReport(msgspec.Struct, frozen=True, kw_only=True,
                        forbid_unknown_fields=True):
    """``cluster init``: the configuration written (or, with ``--dry-run``, that would be)."""

    cluster: str
    coordinator: str
    revision: int  # 1 for the first configuration, +1 per change
    routes: list[ClusterRoute]
    lanes: list[ClusterLane]
    changed_by: str
    reason: str
    replaced: bool  # an earlier configuration was replaced (--replace)
    dry_run: bool
    new_evidence_keys: list[str]  # routes whose evidence key the coordinator made now


class AuditRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One change of the configuration: who, why, when."""

    revision: int
    changed_by: str
    reason: str
    changed_ms: int
    summary: str


class ClusterConfigView(msgspec.Struct, frozen=True, kw_only=True,
                        forbid_unknown_fields=True):
    """``cluster config``: the configuration record and its audit."""

    cluster: str
    coordinator: str
    revision: int
    changed_by: str
    reason: str
    changed_ms: int
    routes: list[ClusterRoute]
    lanes: list[ClusterLane]
    toml: str
    audit: list[AuditRow]


class NodeRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A node: live (it has a member record) or named only by placements, ownership
    records or a drain (``alive`` false)."""

    node_id: str
    alive: bool
    address: str | None  # its admin socket (on host); null when not alive
    host: str | None
    capacity: int | None
    draining: bool
    leader: bool
    shards: list[str]  # the shards whose ownership record names it


class ShardRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A shard: its owner (ownership record) and where it is placed."""

    shard: str
    owner: str | None
    epoch: int | None  # the owner's fencing epoch
    state: ShardState
    placed_on: str | None
    pinned: bool  # placed by an operator (`shard move`)


class ClusterStatus(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``cluster status``: the leader, every node and every shard."""

    cluster: str
    coordinator: str
    leader: str | None
    nodes: list[NodeRow]
    shards: list[ShardRow]


MoveResult = Literal["DRY_RUN", "PLACED", "MOVED", "NOT_YET"]


class ShardMoveReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``shard move``: the pinned placement written, and (``--wait``) whether the target
    owns the shard, ACTIVE."""

    shard: str
    to: str
    owner: str | None  # the owner when the move was placed
    placed_on: str | None  # the placement it replaced
    operator: str
    reason: str
    result: MoveResult  # NOT_YET: --wait ended before the target was ACTIVE (exit 6)
    state: ShardState  # the shard's state when the command ended


DrainResult = Literal["DRY_RUN", "DRAINING", "DRAINED", "NOT_YET"]


class NodeDrainReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``cluster drain``: the drain written, and what the node still owns."""

    node_id: str
    operator: str
    reason: str
    result: DrainResult  # DRAINED: it owns nothing (--wait); NOT_YET: --wait ended (exit 6)
    shards: list[str]  # the shards it owned when the command ended


class NodeUndrainReport(msgspec.Struct, frozen=True, kw_only=True,
                        forbid_unknown_fields=True):
    """``cluster undrain``: whether a drain was removed."""

    node_id: str
    undrained: bool  # false: the node was not draining


class InitJoinReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``init --join``: a node's home, its [cluster] settings and what the cluster gave it."""

    home: str
    config: str
    coordinator: str
    cluster: str
    node_id: str
    capacity: int
    revision: int  # the cluster configuration's revision it was checked against
    shards: list[str]  # every shard of the cluster (the leader places them)
    evidence_keys: list[str]  # routes whose evidence key was written into this home
