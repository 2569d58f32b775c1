"""The cluster screen over the embedded coordinator: records written by ``ClusterStore``
(the configuration, a placement, ownership) and members kept alive by real sessions, read
by the dashboard's own ``CoordinatorSource``; a session that ends shows on the screen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import ClusterHandle, open_cluster
from nereus.cluster.records import Member, OwnerState, Placement
from nereus.coordination.protocol import Session
from nereus.shard import ShardId
from nereus.tui.app import make_app
from nereus.tui.cluster_source import CoordinatorSource
from nereus.tui.screens.cluster import ClusterScreen
from nereus.tui.widgets.cluster import MoveTable, NodeTable, OwnershipTable
from tests.tui.cluster_fakes import CLUSTER_TOML
from tests.tui.fakes import FakeSource, RecordingRunner, snapshots
from tests.tui.pilot import rows, run, until

TTL_MS = 5_000


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[ClusterHandle]:
    handle = open_cluster(f"sqlite://{tmp_path}/c.db/t")
    yield handle
    handle.close()


def _join(store: ClusterStore, node_id: str) -> Session:
    session = store.handle.coordinator.create_session(TTL_MS, client_identity=node_id)
    store.register(session, Member(node_id=node_id, host="localhost",
                                   address=f"/srv/{node_id}/run/admin.sock"))
    return session


def _own(store: ClusterStore, session: Session, shard: ShardId, node_id: str, *,
         state: OwnerState) -> int:
    owned = store.take(session, shard, node_id=node_id, owner_id=f"{node_id}:1", now_ms=0)
    assert owned is not None
    if state != OwnerState.RECOVERING:
        owned = store.update_owner(session, shard, owned, state=state)
    return owned.record.epoch


def test_the_screen_reads_the_embedded_coordinator_and_sees_a_node_go(
        tmp_path: Path, handle: ClusterHandle) -> None:
    """Two live nodes, n1 leading: n1 holds default/0 ACTIVE and default/1 RELEASING to
    n2 (MOVING), n2 recovers default/2, default/3 is unowned. When n2's session ends, its
    member and ownership records go with it: n2 is listed not alive (a placement still
    names it) and default/2 becomes UNOWNED, without a key pressed."""
    store = ClusterStore(handle)
    store.write_config(CLUSTER_TOML, changed_by="test", reason="screen test", now_ms=0,
                       expected=None)
    n1, n2 = _join(store, "n1"), _join(store, "n2")
    try:
        assert store.try_lead(n1, "n1", now_ms=0)
        for partition, node in ((0, "n1"), (1, "n2"), (2, "n2")):
            shard = ShardId("default", partition)
            store.place(shard, Placement(shard=f"default:{partition}", node_id=node),
                        expected=None)
        epoch0 = _own(store, n1, ShardId("default", 0), "n1", state=OwnerState.ACTIVE)
        _own(store, n1, ShardId("default", 1), "n1", state=OwnerState.RELEASING)
        _own(store, n2, ShardId("default", 2), "n2", state=OwnerState.RECOVERING)
        source = CoordinatorSource(f"sqlite://{tmp_path}/c.db/t", node_id="n1")
        app = make_app(FakeSource(snapshots(1)), RecordingRunner(), operator="tester",
                       cluster=source, cluster_interval_s=0.1)

        async def scenario() -> None:
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.press("n")
                screen = app.screen
                assert isinstance(screen, ClusterScreen)
                await until(pilot, lambda: screen.panel.overview is not None,
                            what="the first read of the coordinator")
                assert [row[:5] for row in rows(screen.query_one(NodeTable))] == [
                    ["n1 (this)", "yes", "★ leader", "", "2"], ["n2", "yes", "", "", "1"]]
                shards = rows(screen.query_one(OwnershipTable))
                assert [row[:3] for row in shards] == [
                    ["default/0", "ACTIVE", "n1"], ["default/1", "MOVING", "n1"],
                    ["default/2", "RECOVERING", "n2"], ["default/3", "UNOWNED", "-"]]
                assert shards[0][3] == str(epoch0)
                assert [row[:2] for row in rows(screen.query_one(MoveTable))] == [
                    ["default/1", "MOVING"], ["default/2", "RECOVERING"]]
                n2.close()
                await until(pilot, lambda: screen.panel.overview is not None and [
                    node.alive for node in screen.panel.overview.nodes] == [True, False],
                    what="n2's session to end")
                states = [row[1] for row in rows(screen.query_one(OwnershipTable))]
                assert states == ["ACTIVE", "MOVING", "UNOWNED", "UNOWNED"]
                assert rows(screen.query_one(NodeTable))[1][:2] == ["n2", "NO"]
        run(scenario)
    finally:
        n1.close()
        n2.close()
