"""``cluster status``'s view of the records (``nereus.cli.commands.cluster.status_view``):
nodes alive only with a member, and shards outside the configuration listed (the shard
states' rules are tested with ``nereus.cluster.status``, in ``test_cluster_status.py``)."""

from __future__ import annotations

from nereus.adapters.cluster.cluster_store import ClusterView
from nereus.cli.commands.cluster.status_view import node_rows, shard_rows
from nereus.cluster.records import Drain, Leader, Member, OwnerRecord, OwnerState, Placement
from nereus.shard import ShardId


def _owner(node: str, state: OwnerState) -> OwnerRecord:
    return OwnerRecord(shard="r/0", node_id=node, owner_id=f"o-{node}", state=state, epoch=7)


def test_nodes_without_a_member_record_are_listed_not_alive() -> None:
    """Nodes named by placements, owners or drains appear with alive false and no address;
    shards outside the configuration still get a row."""
    r0, r1, r9 = ShardId("r", 0), ShardId("r", 1), ShardId("r", 9)
    view = ClusterView(
        config=None, leader=Leader(node_id="n1"),
        members={"n1": Member(node_id="n1", host="h", address="/a.sock", capacity=2)},
        placements={r0: Placement(shard="r/0", node_id="placed-only")},
        owners={r1: _owner("owner-only", OwnerState.ACTIVE)},
        drains={"drained-only": Drain(node_id="drained-only", operator="o", reason="r")})
    rows = {row.node_id: row for row in node_rows(view)}
    assert {node: row.alive for node, row in rows.items()} == {
        "n1": True, "placed-only": False, "owner-only": False, "drained-only": False}
    assert rows["n1"].leader and rows["n1"].capacity == 2 and rows["n1"].address == "/a.sock"
    assert rows["owner-only"].shards == ["r/1"] and rows["owner-only"].address is None
    assert rows["drained-only"].draining
    assert [row.shard for row in shard_rows(view, [r0, r9])] == ["r/0", "r/1", "r/9"]


def test_each_live_node_and_worker_shows_the_keys_it_said_it_holds() -> None:
    """A node's row carries the sealing key fingerprints and evidence key generations it
    reported (a node run as workers: its first worker's), each worker its own; a node that
    is not alive shows none, even with a report left behind."""
    from nereus.cluster.records import NodeKeys

    view = ClusterView(
        config=None, leader=None, placements={}, owners={},
        members={"n1": Member(node_id="n1", host="h", address="/a"),
                 "n2-w0": Member(node_id="n2-w0", host="h", address="/b")},
        drains={"gone": Drain(node_id="gone", operator="o", reason="r")})
    held = {"n1": NodeKeys(node_id="n1", seal_key_ids=["new", "old"], generations={"r": 2}),
            "n2-w0": NodeKeys(node_id="n2-w0", seal_key_ids=["old"], generations={"r": 1}),
            "gone": NodeKeys(node_id="gone", seal_key_ids=["x"], generations={"r": 1})}
    rows = {row.node_id: row for row in node_rows(view, held)}
    assert (rows["n1"].seal_key_ids, rows["n1"].evidence_key_generations) == \
        (["new", "old"], {"r": 2})
    assert rows["n2"].seal_key_ids == ["old"] and rows["n2"].workers[0].seal_key_ids == ["old"]
    assert rows["gone"].seal_key_ids is None
