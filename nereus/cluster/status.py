"""A shard's state as operators see it, from its records alone (no coordinator, no clock).

* no ownership record: **UNOWNED**;
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

from nereus.cluster.records import Drain, Leader, Member, OwnerRecord, OwnerState, Placement
from nereus.shard import ShardId

ShardState = Literal["ACTIVE", "RECOVERING", "MOVING", "FAILED", "UNOWNED"]

IN_MOTION: frozenset[ShardState] = frozenset({"RECOVERING", "MOVING"})


def shard_state(owner: OwnerRecord | None, placement: Placement | None) -> ShardState:
    """The rules of the module's docstring."""
    if owner is None:
        return "UNOWNED"
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
class NodeFacts:
    """A node as the records name it: live (a member record) or only named by placements,
    ownership records or a drain."""

    node_id: str
    member: Member | None
    draining: bool
    leader: bool
    shards: tuple[str, ...]  # the shards whose ownership record names it

    @property
    def alive(self) -> bool:
        return self.member is not None


def node_facts(members: Mapping[str, Member], owners: Mapping[ShardId, OwnerRecord],
               placements: Mapping[ShardId, Placement], drains: Mapping[str, Drain],
               leader: Leader | None) -> list[NodeFacts]:
    """Every node any record names, by id."""
    owned: dict[str, list[str]] = {}
    for shard, owner in sorted(owners.items()):
        owned.setdefault(owner.node_id, []).append(str(shard))
    named = {*members, *owned, *drains, *(p.node_id for p in placements.values())}
    leading = None if leader is None else leader.node_id
    return [NodeFacts(node_id=node, member=members.get(node), draining=node in drains,
                      leader=node == leading, shards=tuple(owned.get(node, ())))
            for node in sorted(named)]
