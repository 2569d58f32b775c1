"""The leader's placement: every shard on a live, undrained node, every node within one of
its capacity-weighted share, pinned and balanced shards left where they are."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nereus.cluster.placement import Assignment, plan_placement, quotas
from nereus.shard import ShardId

NODES = st.dictionaries(st.sampled_from([f"n{i}" for i in range(6)]),
                        st.integers(min_value=0, max_value=4), max_size=6)
SHARDS = st.integers(min_value=0, max_value=40).map(
    lambda n: [ShardId("default", p) for p in range(n)])


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[ShardId], dict[str, int],
                                       dict[ShardId, Assignment], frozenset[str]]:
    shards = draw(SHARDS)
    nodes = draw(NODES)
    known = [*sorted(nodes), "gone1", "gone2"]
    current = {shard: Assignment(draw(st.sampled_from(known)), "before",
                                 pinned=draw(st.booleans()) and draw(st.booleans()))
               for shard in shards if draw(st.booleans())}
    draining = frozenset(draw(st.sets(st.sampled_from(known), max_size=2)))
    return shards, nodes, current, draining


@given(count=st.integers(min_value=0, max_value=500), nodes=NODES)
def test_quotas_add_up_and_each_is_its_share_rounded(count: int, nodes: dict[str, int]) -> None:
    """Quotas sum to the shard count (when anyone has capacity) and each node's quota is its
    exact capacity-weighted share rounded down or up."""
    share = quotas(count, nodes)
    total = sum(nodes.values())
    if total == 0:
        assert all(q == 0 for q in share.values())
        return
    assert sum(share.values()) == count
    for node, cap in nodes.items():
        exact = count * cap / total
        assert int(exact) <= share[node] <= int(exact) + 1


@given(clusters())
def test_every_shard_lands_on_a_live_undrained_node_within_one_of_its_share(
        cluster: tuple[list[ShardId], dict[str, int], dict[ShardId, Assignment],
                       frozenset[str]]) -> None:
    """With any eligible node, every shard is placed on one; unpinned load is within one of
    each node's quota; a pinned shard on an eligible node stays."""
    shards, nodes, current, draining = cluster
    plan = plan_placement(shards, nodes, current, draining)
    eligible = {n: c for n, c in nodes.items() if n not in draining and c > 0}
    if not eligible:
        assert plan == {s: current[s] for s in shards if s in current}
        return
    assert set(plan) == set(shards)
    assert all(a.node_id in eligible for a in plan.values())
    quota = quotas(len(shards), eligible)
    pinned_kept = {s for s, a in current.items() if a.pinned and a.node_id in eligible}
    for shard in pinned_kept:
        assert plan[shard] == current[shard]
    if not pinned_kept:
        held = {n: sum(1 for a in plan.values() if a.node_id == n) for n in eligible}
        assert held == quota


@given(clusters())
def test_a_placement_that_keeps_the_quotas_is_left_alone(
        cluster: tuple[list[ShardId], dict[str, int], dict[ShardId, Assignment],
                       frozenset[str]]) -> None:
    """Planning again over its own result moves nothing: a leader that re-plans (or a new
    leader) causes no planned move by itself."""
    shards, nodes, current, draining = cluster
    first = plan_placement(shards, nodes, current, draining)
    again = plan_placement(shards, nodes, first, draining)
    assert {s: a.node_id for s, a in again.items()} == {s: a.node_id for s, a in first.items()}


def test_a_dead_nodes_shards_go_to_the_least_loaded_and_say_why() -> None:
    """Failover: shards of a node that left are placed on the others, with the reason."""
    shards = [ShardId("default", p) for p in range(6)]
    current = {s: Assignment(["a", "b", "c"][s.partition % 3], "before") for s in shards}
    plan = plan_placement(shards, {"a": 1, "b": 1}, current)
    moved = {s: a for s, a in plan.items() if current[s].node_id == "c"}
    assert {a.node_id for a in plan.values()} == {"a", "b"}
    assert sorted(sum(1 for a in plan.values() if a.node_id == n) for n in "ab") == [3, 3]
    assert all(a.reason == "node c is gone" for a in moved.values())


def test_a_joining_node_receives_its_share_from_the_fullest() -> None:
    """A node that joins gets shards moved from nodes over their new quota (planned moves),
    and only as many as its share."""
    shards = [ShardId("default", p) for p in range(6)]
    current = {s: Assignment("a" if s.partition < 3 else "b", "before") for s in shards}
    plan = plan_placement(shards, {"a": 1, "b": 1, "c": 1}, current)
    moved = [s for s in shards if plan[s].node_id != current[s].node_id]
    assert len(moved) == 2 and all(plan[s].node_id == "c" for s in moved)
    assert all(plan[s].reason.startswith("balance: node ") for s in moved)


def test_capacity_weights_the_share() -> None:
    """A node with twice the capacity holds twice the shards."""
    shards = [ShardId("default", p) for p in range(9)]
    plan = plan_placement(shards, {"big": 2, "small": 1}, {})
    assert sum(1 for a in plan.values() if a.node_id == "big") == 6


def test_a_gone_nodes_shards_go_to_its_standby_while_it_is_below_its_quota() -> None:
    """n2 is gone: its first shard goes to n3, the standby that kept it warm (the next node
    by id), though n1 is as free; the second to n1, n3 being at its quota then."""
    shards = [ShardId("default", p) for p in range(6)]
    current = {s: Assignment(f"n{s.partition % 3 + 1}", "before") for s in shards}
    plan = plan_placement(shards, {"n1": 1, "n3": 1}, current)
    moved = {s.partition: plan[s].node_id for s in shards if current[s].node_id == "n2"}
    assert moved == {1: "n3", 4: "n1"}, moved
    held = {n: sum(a.node_id == n for a in plan.values()) for n in ("n1", "n3")}
    assert held == {"n1": 3, "n3": 3}
