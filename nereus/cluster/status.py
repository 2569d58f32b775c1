"""A shard's state as operators see it, from its records alone (no coordinator, no clock).

* no ownership record: **UNOWNED**;
* its owner is known to be gone while its record still lives (its coordinator session has
  gone without a heartbeat longer than a live one ever does, or its process is gone from
  this host): **OWNER_LOST** — nobody serves it until the record's lease ends (the time
  left is shown beside it), then the placed node takes it;
* its owner is RECOVERING (restoring, replaying, activating): **RECOVERING**;
* its owner holds it FAILED (its activation raised, or its loop failed): **FAILED**;
* its owner is RELEASING, or the placement names another node than the owner: **MOVING**;
* else **ACTIVE**.

``nereus cluster status`` and the dashboard's cluster screen both show these, so the rules
live here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from nereus.cluster.names import front_door_address, node_of, worker_index
from nereus.cluster.records import Drain, Leader, Member, OwnerRecord, OwnerState, Placement
from nereus.shard import ShardId

ShardState = Literal["ACTIVE", "RECOVERING", "MOVING", "FAILED", "OWNER_LOST", "UNOWNED"]

IN_MOTION: frozenset[ShardState] = frozenset({"RECOVERING", "MOVING"})


def shard_state(owner: OwnerRecord | None, placement: Placement | None, *,
                owner_lost: bool = False) -> ShardState:
    """The rules of the module's docstring (``owner_lost``: the owner is known gone)."""
    if owner is None:
        return "UNOWNED"
    if owner_lost:
        return "OWNER_LOST"
    if owner.state == OwnerState.RECOVERING:
        return "RECOVERING"
    if owner.state == OwnerState.FAILED:
        return "FAILED"
    if owner.state == OwnerState.RELEASING or (
            placement is not None and placement.node_id != owner.node_id):
        return "MOVING"
    return "ACTIVE"


def configured_shards(toml: str, *, source: str) -> list[ShardId]:
    """Every shard of the cluster's configuration (its routes' partitions)."""
    from nereus.config import parse_config

    config = parse_config(toml, source=source)
    return [ShardId(route.name, partition) for route in config.routes.values()
            for partition in range(route.partitions)]


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    """One worker process of a node (``<node_id>-w<K>``) as the records name it."""

    worker_id: str  # its member id, ``<node_id>-w<K>``
    member: Member | None
    draining: bool  # drained by its own id (a drain of its node drains it too)
    shards: tuple[str, ...]  # the shards whose ownership record names it

    @property
    def alive(self) -> bool:
        return self.member is not None


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """A node as the records name it, by the id its operator gave it (``init --join
    --node-id``): live (a member record of its own, or of one of its workers) or only
    named by placements, ownership records or a drain. ``member`` is its own member
    record, else its first live worker's (its host); ``shards`` are its own and its
    workers'."""

    node_id: str
    member: Member | None
    draining: bool
    leader: bool
    shards: tuple[str, ...]  # the shards whose ownership record names it or a worker of it
    workers: tuple[WorkerFacts, ...] = ()

    @property
    def alive(self) -> bool:
        return self.member is not None

    @property
    def address(self) -> str | None:
        """Its admin socket: its own member's, or its front door's for a node of workers."""
        if self.member is None:
            return None
        return front_door_address(self.member.address) if self.workers else \
            self.member.address


def node_facts(members: Mapping[str, Member], owners: Mapping[ShardId, OwnerRecord],
               placements: Mapping[ShardId, Placement], drains: Mapping[str, Drain],
               leader: Leader | None) -> list[NodeFacts]:
    """Every node any record names, by its given id, its workers under it."""
    owned: dict[str, list[str]] = {}
    for shard, owner in sorted(owners.items()):
        owned.setdefault(owner.node_id, []).append(str(shard))
    named = {*members, *owned, *drains, *(p.node_id for p in placements.values())}
    leading = None if leader is None else leader.node_id
    by_node: dict[str, list[str]] = {}
    for name in named:
        by_node.setdefault(node_of(name), []).append(name)
    out = []
    for node, names in sorted(by_node.items()):
        workers = tuple(WorkerFacts(worker_id=name, member=members.get(name),
                                    draining=name in drains or node in drains,
                                    shards=tuple(owned.get(name, ())))
                        for name in sorted((n for n in names if n != node), key=_worker_order))
        own = members.get(node)
        live = own or next((w.member for w in workers if w.member is not None), None)
        shards = sorted({*owned.get(node, ()), *(s for w in workers for s in w.shards)},
                        key=ShardId.parse)
        out.append(NodeFacts(
            node_id=node, member=live, leader=leading in names,
            draining=node in drains or (bool(workers) and all(w.draining for w in workers)),
            shards=tuple(shards), workers=workers))
    return out


def _worker_order(member_id: str) -> tuple[int, str]:
    return worker_index(member_id) or 0, member_id
