"""The standby of a shard: one other node that can hold shards, the same on every node, and
spread: each node stands by for the next one's shards."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nereus.cluster.standby import standby_node

NODES = st.dictionaries(st.sampled_from([f"n{i}" for i in range(6)]),
                        st.integers(min_value=0, max_value=3), max_size=6)


@given(NODES, st.sampled_from([f"n{i}" for i in range(7)]))
def test_the_standby_is_another_node_that_can_hold_shards(
        capacities: dict[str, int], owner: str) -> None:
    """Never the owner, never a node without capacity; None only when no other node can."""
    standby = standby_node(owner, capacities)
    able = {node for node, capacity in capacities.items() if capacity > 0} - {owner}
    assert (standby is None) == (not able)
    assert standby is None or standby in able


def test_each_node_stands_by_for_the_next_one_in_id_order() -> None:
    """The next node after the owner by id, wrapping around: a ring, so every node stands
    by for one other's shards."""
    nodes = {"n1": 1, "n2": 1, "n3": 1}
    assert [standby_node(n, nodes) for n in sorted(nodes)] == ["n2", "n3", "n1"]
    assert standby_node("n2", {"n1": 1, "n2": 1, "n3": 0}) == "n1"
