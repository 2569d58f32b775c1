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


class WorkerRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One worker process of a node run with ``--workers N``: the member ``<node>-w<K>``."""

    worker_id: str
    alive: bool
    pid: int | None
    address: str | None  # the worker's own admin socket; null when not alive
    draining: bool
    shards: list[str]  # the shards whose ownership record names this worker
    seal_key_ids: list[str] | None = None  # as on NodeRow, for this worker
    evidence_key_generations: dict[str, int] | None = None


class NodeRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A node, by the id its operator gave it (``init --join --node-id``): live (a member
    record of its own or of a worker) or named only by placements, ownership records or a
    drain (``alive`` false). A node run as worker processes lists them in ``workers``."""

    node_id: str
    alive: bool
    address: str | None  # its admin socket (on host); null when not alive
    host: str | None
    capacity: int | None  # its capacity (each worker's placement weight)
    draining: bool
    leader: bool  # it, or one of its workers, leads
    shards: list[str]  # the shards whose ownership record names it or one of its workers
    workers: list[WorkerRow]  # empty for a node run as one process
    # the fingerprints of the sealing keys it holds (the current one first, then the one
    # before it while it is changed) and each route's evidence key generation it signs
    # with, as it last said (its own process's, else its first worker's); null when it
    # has not said (not alive, or an older version)
    seal_key_ids: list[str] | None = None
    evidence_key_generations: dict[str, int] | None = None


class ShardRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A shard: its owner (ownership record) and where it is placed."""

    shard: str
    owner: str | None  # the owner's node id
    owner_worker: str | None  # the worker of that node that owns it (`<node>-w<K>`), or null
    epoch: int | None  # the owner's fencing epoch
    state: ShardState  # OWNER_LOST: its owner is gone, its record lives until its lease ends
    placed_on: str | None  # the node it is placed on
    placed_on_worker: str | None  # the worker of that node, or null
    pinned: bool  # placed by an operator (`shard move`)
    # how long the owner's coordinator session lives without a heartbeat (null: the
    # coordinator does not say, or nobody owns the shard)
    lease_left_ms: int | None
    detail: str | None  # why, for a FAILED or OWNER_LOST shard


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
    to: str  # the node asked for
    to_worker: str | None  # the worker of that node the shard is placed on, or null
    owner: str | None  # the owner's node when the move was placed
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
    """``cluster undrain``: whether a drain was removed, by whom and why."""

    node_id: str
    undrained: bool  # false: the node was not draining (or --dry-run)
    operator: str
    reason: str
    dry_run: bool


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


class KindCount(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How many records of one kind (the key's first segment: config, config-audit,
    placement, drains, secrets, catalog, epochs) a migration copied."""

    kind: str
    records: int


class ShardEpochRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A shard's epoch counter as copied: its next owner activates above it."""

    shard: str
    epoch: int


MigrateResult = Literal["DRY_RUN", "MIGRATED"]


class ClusterMigrateReport(msgspec.Struct, frozen=True, kw_only=True,
                           forbid_unknown_fields=True):
    """``cluster migrate``: the cluster copied to another coordinator."""

    cluster: str
    source: str  # the coordinator it was at
    target: str  # the coordinator it is at now (with --dry-run: would be)
    result: MigrateResult
    records: int  # durable records copied
    kinds: list[KindCount]
    epochs: list[ShardEpochRow]
    replaced: str | None  # what the target held of this cluster before, or null
    recopied: int  # records that changed on the source while it was copied
    operator: str
    reason: str


RejoinResult = Literal["DRY_RUN", "REJOINED", "UNCHANGED"]


class ClusterRejoinReport(msgspec.Struct, frozen=True, kw_only=True,
                          forbid_unknown_fields=True):
    """``cluster rejoin``: the home's node now names another coordinator."""

    home: str
    config: str  # the nereus.toml rewritten
    node_id: str
    cluster: str
    coordinator: str  # the coordinator the home names now (with --dry-run: would name)
    previous: str  # the one it named before
    result: RejoinResult  # UNCHANGED: it named that coordinator already


class RotatedRouteKey(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One route's rotation: the generation signing now and the one still verifying."""

    route: str
    generation: int  # the key evidence is signed with from now on (on dry runs: would be)
    previous_generation: int
    previous_verifies_until_ms: int  # Unix time in ms


class EvidenceKeyRotation(msgspec.Struct, frozen=True, kw_only=True,
                          forbid_unknown_fields=True):
    """``cluster rotate-evidence-key``: the routes whose evidence key was rotated."""

    cluster: str
    coordinator: str
    seal_key_id: str  # which sealing key sealed the new keys (a fingerprint, not the key)
    grace_ms: int
    operator: str
    reason: str
    result: Literal["ROTATED", "DRY_RUN"]
    routes: list[RotatedRouteKey]


class ResealedRouteKey(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One route's re-seal: its evidence keys (unchanged) and what was done to them."""

    route: str
    # RESEALED: sealed again under the new sealing key; ALREADY: it was under it; SEALED: a
    # plain key (or none) sealed under it (on dry runs: what would be done)
    action: Literal["RESEALED", "ALREADY", "SEALED"]
    was_seal_key_id: str | None  # the sealing key it was under (a fingerprint); null: none
    generation: int  # the key evidence is signed with (unchanged)
    previous_generation: int | None = None  # the key still verifying in a grace, if any


class EvidenceKeysResealed(msgspec.Struct, frozen=True, kw_only=True,
                           forbid_unknown_fields=True):
    """``cluster reseal-evidence-keys``: every route's evidence keys under a new sealing key."""

    cluster: str
    coordinator: str
    seal_key_id: str  # the new sealing key's fingerprint (never the key)
    old_seal_key_ids: list[str]  # the fingerprints of the keys it opened with
    operator: str
    reason: str
    result: Literal["RESEALED", "DRY_RUN"]
    routes: list[ResealedRouteKey]
