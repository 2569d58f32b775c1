"""A shard's state from its ownership record and placement (``nereus.cluster.status``):
the five states ``cluster status`` and the dashboard's cluster screen show."""

from __future__ import annotations

import pytest

from nereus.cluster.records import OwnerRecord, OwnerState, Placement
from nereus.cluster.status import ShardState, configured_shards, shard_state
from nereus.shard import ShardId


def _owner(state: OwnerState, node: str = "a") -> OwnerRecord:
    return OwnerRecord(shard="default:0", node_id=node, owner_id=f"{node}:1", state=state)


def _placed(node: str) -> Placement:
    return Placement(shard="default:0", node_id=node)


@pytest.mark.parametrize(("owner", "placement", "expected"), [
    (None, None, "UNOWNED"),
    (None, _placed("a"), "UNOWNED"),
    (_owner(OwnerState.RECOVERING), _placed("b"), "RECOVERING"),
    (_owner(OwnerState.RELEASING), _placed("a"), "MOVING"),
    (_owner(OwnerState.ACTIVE), _placed("b"), "MOVING"),
    (_owner(OwnerState.ACTIVE), _placed("a"), "ACTIVE"),
    (_owner(OwnerState.ACTIVE), None, "ACTIVE"),
    (_owner(OwnerState.FAILED), _placed("a"), "FAILED"),
    (_owner(OwnerState.FAILED), _placed("b"), "FAILED"),
])
def test_shard_state(owner: OwnerRecord | None, placement: Placement | None,
                     expected: ShardState) -> None:
    """No record: UNOWNED; a recovering owner: RECOVERING; an owner holding it FAILED (its
    activation raised or its loop failed): FAILED, wherever it is placed; a releasing owner
    or a placement elsewhere: MOVING; otherwise ACTIVE."""
    assert shard_state(owner, placement) == expected


def test_configured_shards_are_every_partition_of_every_route() -> None:
    """The cluster's configuration names its shards: each route's partitions."""
    toml = ('[routes.default]\nlog = "kafka"\npartitions = 2\nbootstrap = "b:9092"\n'
            '[routes.eu]\nlog = "kafka"\npartitions = 1\nbootstrap = "b:9092"\n')
    assert configured_shards(toml, source="test") == [
        ShardId("default", 0), ShardId("default", 1), ShardId("eu", 0)]
