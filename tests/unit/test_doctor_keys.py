"""``doctor``'s comparison of what each live node holds with the routes' sealed records
(``nereus.cli.commands.doctor_keys.key_problems``): a node lacking the sealing key a route
is sealed under, nodes sealing with different keys, and a node behind a rotation once it
had time to take it or once its generation's grace has ended."""

from __future__ import annotations

from nereus.cli.commands.doctor_keys import LAG_MS, key_problems
from nereus.cluster.records import NodeKeys, SealedKey, SealedRouteKey

ROTATED_MS = 1_000_000
GRACE_END_MS = ROTATED_MS + 3_600_000


def _record(key_id: str = "new") -> SealedRouteKey:
    return SealedRouteKey(route="r", key_id=key_id,
                          current=SealedKey(generation=2, sealed="", made_ms=ROTATED_MS),
                          previous=SealedKey(generation=1, sealed=""),
                          previous_until_ms=GRACE_END_MS)


def _node(node: str, seal: list[str], generation: int) -> NodeKeys:
    return NodeKeys(node_id=node, seal_key_ids=seal, generations={"r": generation})


def test_nodes_holding_the_records_keys_and_generation_raise_nothing() -> None:
    """Every node on the record's sealing key (current or previous) and generation: none."""
    nodes = {"n1": _node("n1", ["new"], 2), "n2": _node("n2", ["new", "old"], 2)}
    assert key_problems({"r": _record()}, nodes, GRACE_END_MS + 1) == []


def test_a_node_without_the_records_sealing_key_is_named_with_both_fingerprints() -> None:
    """A node whose sealing keys do not include the one the route is sealed under is named,
    with what it holds; nodes sealing with different keys are said too."""
    nodes = {"n1": _node("n1", ["new"], 2), "n2": _node("n2", ["old"], 2)}
    found = key_problems({"r": _record()}, nodes, ROTATED_MS)
    assert any("node n2 does not hold sealing key new" in p and "holds old" in p
               for p in found), found
    assert any("different sealing keys (new, old)" in p for p in found), found


def test_a_node_behind_a_rotation_is_named_after_the_lag_and_after_the_grace() -> None:
    """A node still on generation 1 is fine just after the rotation, named once it had
    time to take it (still verifying), and said to no longer verify after the grace."""
    nodes = {"n1": _node("n1", ["new"], 1)}
    records = {"r": _record()}
    assert key_problems(records, nodes, ROTATED_MS + 1) == []
    lagging = key_problems(records, nodes, ROTATED_MS + LAG_MS + 1)
    assert len(lagging) == 1 and "verifies until" in lagging[0]
    ended = key_problems(records, nodes, GRACE_END_MS)
    assert len(ended) == 1 and "no longer verifies" in ended[0]
