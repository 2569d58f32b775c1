"""Placement: which node should own each shard, as the leader computes it.

Deterministic and pure, so a test can hold it to its promises for any cluster:

* every shard is placed on a live node that is not draining (when there is one);
* each such node holds its **quota**: ``shards * capacity / total capacity`` rounded down
  or up (the remainders go to the largest fractions, ties by node id), so every node is
  within one of its capacity-weighted mean;
* a shard stays where it is while that keeps the quotas (a move costs a planned handover),
  and an operator's pinned placement stays while its node lives and is not drained;
* a shard whose node is gone goes to that node's standby (``standby.py``: it kept a warm
  copy) while the standby is below its quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nereus.cluster.standby import standby_node
from nereus.shard import ShardId


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a shard should be, and why it is (or went) there."""

    node_id: str
    reason: str
    pinned: bool = False


def quotas(shard_count: int, capacities: Mapping[str, int]) -> dict[str, int]:
    """How many shards each node should hold: its capacity-weighted share, rounded by the
    largest remainder so the quotas add up to ``shard_count``."""
    total = sum(capacities.values())
    if total <= 0:
        return {node: 0 for node in capacities}
    exact = {node: shard_count * cap / total for node, cap in capacities.items()}
    share = {node: int(value) for node, value in exact.items()}
    left = shard_count - sum(share.values())
    by_remainder = sorted(capacities, key=lambda node: (-(exact[node] - share[node]), node))
    for node in by_remainder[:left]:
        share[node] += 1
    return share


def plan_placement(shards: Sequence[ShardId], capacities: Mapping[str, int],
                   current: Mapping[ShardId, Assignment],
                   draining: frozenset[str] = frozenset()) -> dict[ShardId, Assignment]:
    """The desired placement of ``shards`` over the live nodes (``capacities``).

    ``current`` is the placement written so far; a node absent from ``capacities`` is gone.
    With no eligible node, shards keep their current placement (nothing better exists).
    """
    eligible = {node: cap for node, cap in capacities.items()
                if node not in draining and cap > 0}
    if not eligible:
        return {shard: current[shard] for shard in shards if shard in current}
    quota = quotas(len(shards), eligible)
    count = dict.fromkeys(eligible, 0)
    plan: dict[ShardId, Assignment] = {}
    ordered = sorted(shards, key=lambda s: (not _pinned(current.get(s)), s.route, s.partition))
    homeless: list[tuple[ShardId, str]] = []
    warm: dict[ShardId, str] = {}  # a gone node's shard -> its standby
    for shard in ordered:
        now = current.get(shard)
        if now is None:
            homeless.append((shard, "new shard"))
        elif now.node_id not in capacities:
            homeless.append((shard, f"node {now.node_id} is gone"))
            if (standby := standby_node(now.node_id, capacities)) in eligible:
                warm[shard] = standby
        elif now.node_id in draining:
            homeless.append((shard, f"node {now.node_id} is draining"))
        elif now.node_id not in eligible:
            homeless.append((shard, f"node {now.node_id} has no capacity"))
        elif now.pinned or count[now.node_id] < quota[now.node_id]:
            plan[shard] = now
            count[now.node_id] += 1
        else:
            homeless.append((shard, f"balance: node {now.node_id} held more than its "
                                    f"share ({quota[now.node_id]})"))
    for shard, why in homeless:
        target = warm.get(shard, "")
        if target not in eligible or count[target] >= quota[target]:
            target = min(eligible,
                         key=lambda node: (count[node] - quota[node], count[node], node))
        plan[shard] = Assignment(target, why)
        count[target] += 1
    return plan


def _pinned(assignment: Assignment | None) -> bool:
    return assignment is not None and assignment.pinned
