"""The standby of a shard: the one node that keeps a warm copy of a shard another node owns,
so a failover replays seconds of the Command Topic, not a checkpoint's distance.

Deterministic and pure: the next node after the owner, in node-id order and cyclically,
among the members that can hold shards (capacity above 0). Every node computes the same
answer from the same member records, so exactly one node warms each owned shard.
"""

from __future__ import annotations

from collections.abc import Mapping


def standby_node(owner: str, capacities: Mapping[str, int]) -> str | None:
    """The node that stands by for a shard ``owner`` holds, or None (no other node can)."""
    others = sorted(node for node, capacity in capacities.items()
                    if capacity > 0 and node != owner)
    if not others:
        return None
    return next((node for node in others if node > owner), others[0])
