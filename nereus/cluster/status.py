"""A shard's state as operators see it, from its records alone (no coordinator, no clock).

* no ownership record: **UNOWNED**;
* its owner is RECOVERING (restoring, replaying, activating): **RECOVERING**;
* its owner is RELEASING, or the placement names another node than the owner: **MOVING**;
* else **ACTIVE**.

``nereus cluster status`` and the dashboard's cluster screen both show these, so the rules
live here once.
"""

from __future__ import annotations

from typing import Literal

from nereus.cluster.records import OwnerRecord, OwnerState, Placement
from nereus.shard import ShardId

ShardState = Literal["ACTIVE", "RECOVERING", "MOVING", "UNOWNED"]

IN_MOTION: frozenset[ShardState] = frozenset({"RECOVERING", "MOVING"})


def shard_state(owner: OwnerRecord | None, placement: Placement | None) -> ShardState:
    """The rules of the module's docstring."""
    if owner is None:
        return "UNOWNED"
    if owner.state == OwnerState.RECOVERING:
        return "RECOVERING"
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
