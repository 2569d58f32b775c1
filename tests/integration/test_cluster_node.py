"""Cluster nodes in one process, on the embedded coordinator and one home's file Shard Logs
(how the workers of one host share a home): placement, ownership at the coordinator's
epoch, a planned move with nothing left UNCERTAIN, and a lost session handing its shards
over. No service is needed; the multi-host failover tests run real daemons on etcd."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from nereus.adapters.admin.wire import AppendRequest, RecordToAppend
from nereus.adapters.backends.coordination.sqlite import SqliteCoordinator
from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.adapters.time_source import SYSTEM_CLOCK
from nereus.cluster.records import OwnerState, Placement
from nereus.config import parse_config
from nereus.coordination.records import prefix_range
from nereus.engine.admin.api import AdminApi
from nereus.engine.hosting.admin_server import AdminServer
from nereus.engine.hosting.cluster.cluster_node import ClusterNode
from nereus.engine.hosting.cluster.node_api import NodeApi
from nereus.engine.hosting.cluster.node_lookup import StoreOwnerLookup
from nereus.engine.hosting.cluster.node_settings import NodeSettings
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.process.home_engine import Engine
from nereus.errors import ShardNotHere
from nereus.records import MessageState
from nereus.shard import ShardId
from tests.integration.engine_harness import CONFIG, Events, Harness, file_lane, now_ms
from tests.integration.test_engine_publish import message_states
from tests.polling import wait_until

PARTITIONS = 4
TTL_MS = 2_000


@dataclass
class Cluster:
    home: Path
    store: ClusterStore
    nodes: dict[str, ClusterNode]

    def owners(self) -> dict[ShardId, tuple[str, OwnerState, int]]:
        return {shard: (o.record.node_id, o.record.state, o.record.epoch)
                for shard, o in self.store.owners().items()}

    def settled(self) -> bool:
        """Every shard ACTIVE on the node its placement names."""
        owners = self.owners()
        placed = {shard: p.node_id for shard, (p, _) in self.store.placements().items()}
        return len(owners) == PARTITIONS and all(
            state == OwnerState.ACTIVE and placed.get(shard) == node
            for shard, (node, state, _) in owners.items())

    def held(self) -> Counter[str]:
        return Counter(node for node, _, _ in self.owners().values())


def start_node(home: Path, handle: ClusterHandle, node_id: str, stack: ExitStack, *,
               settings: EngineSettings | None = None,
               events: Events | None = None) -> ClusterNode:
    """Node ``node_id`` of the cluster on ``handle``, its engine on ``home`` (``events``
    keeps what it logs)."""
    text = (home / "nereus.toml").read_text()
    def log_event(event: str, /, **fields: object) -> None:
        print(node_id, event, fields, flush=True)
        if events is not None:
            events(event, **fields)
    engine = Engine(home, parse_config(text, source="test"), log_event=log_event,
                    settings=settings or EngineSettings(), catalog=handle)
    engine.start(owned=())
    store = ClusterStore(handle)
    node = ClusterNode(engine, store, NodeSettings(
        node_id=node_id, host="localhost", address=f"{home}/run/{node_id}.sock",
        session_ttl_ms=TTL_MS, lease_margin_ms=500, interval_s=0.2),
        clock=SYSTEM_CLOCK, events=engine.log_event,
        reload=lambda: parse_config(store.require_config().toml, source="cluster"))
    node.join()
    node.start(engine.supervisor)
    server = AdminServer(NodeApi(engine, store, host="localhost"), home / "run" /
                         f"{node_id}.sock", on_shutdown=lambda: None)
    server.start(engine.supervisor)

    def stop() -> None:
        server.close()
        node.stop_reconciling()
        engine.stop()
        node.leave()
    stack.callback(stop)
    return node


@contextmanager
def cluster(tmp_path: Path, node_ids: list[str], *, settings: EngineSettings | None = None,
            events: dict[str, Events] | None = None) -> Iterator[Cluster]:
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    text = CONFIG.format(partitions=PARTITIONS, lanes=file_lane("local", "outbox/local.jsonl"))
    (home / "nereus.toml").write_text(text)
    coordinator = SqliteCoordinator(tmp_path / "coordinator.db")
    handle = ClusterHandle("sqlite://test", "test", coordinator, "test/")
    store = ClusterStore(handle)
    store.write_config(text, changed_by="test", reason="cluster test", now_ms=now_ms(),
                       expected=None)
    with ExitStack() as stack:
        stack.callback(coordinator.close)
        nodes = {node_id: start_node(home, handle, node_id, stack, settings=settings,
                                     events=(events or {}).get(node_id))
                 for node_id in node_ids}
        yield Cluster(home, store, nodes)


def schedule(harness: Harness, ids: list[str], delay_ms: int) -> None:
    base = now_ms()
    harness.queue([harness.schedule(mid, base + delay_ms) for mid in ids])


def published(home: Path) -> Counter[str]:
    path = home / "outbox" / "local.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(json.loads(line)["delay_message_id"] for line in lines if line)


@pytest.mark.timeout(90)
def test_nodes_share_the_shards_and_a_planned_move_leaves_nothing_uncertain(
        tmp_path: Path) -> None:
    """Two nodes hold two shards each at epochs the coordinator granted; moving a shard
    under load hands it over with every message published exactly once and none UNCERTAIN,
    and the new owner's epoch is above the old one's."""
    with cluster(tmp_path, ["a", "b"]) as c:
        # b joined after a took everything: it receives its share by planned moves
        wait_until("every shard active, two on each node", lambda: c.settled()
                   and c.held() == Counter({"a": 2, "b": 2}), 30, seen=c.owners)
        # asked for a shard it does not own, a node's admin API names the owner
        b_shard = next(s for s, (node, _, _) in c.owners().items() if node == "b")
        api = AdminApi(c.nodes["a"].engine, owners=StoreOwnerLookup(c.store))
        with pytest.raises(ShardNotHere, match=r"not owned by this engine: node b on localhost"):
            api.messages(shard=str(b_shard), state=None, lane=None, limit=1)
        harness = Harness(c.home, c.nodes["a"].engine, PARTITIONS)
        ids = [f"m{n}" for n in range(200)]
        schedule(harness, ids[:100], 200)
        shard = ShardId("default", 0)
        before_node, _, before_epoch = c.owners()[shard]
        target = "b" if before_node == "a" else "a"
        (_, version), = [v for s, v in c.store.placements().items() if s == shard]
        c.store.place(shard, Placement(shard=str(shard), node_id=target, pinned=True,
                                       reason="test move", operator="test"), expected=version)
        schedule(harness, ids[100:], 300)
        wait_until("the shard active on its new node",
                   lambda: c.settled() and c.owners()[shard][0] == target, 30, seen=c.owners)
        assert c.owners()[shard][2] > before_epoch
        # the old owner's checkpoint at release is catalogued in the coordinator (after
        # the release: the checkpointer uploads it once the old owner has let go)
        wait_until("the release checkpoint catalogued", lambda: bool(
            c.store.handle.coordinator.list(*prefix_range("test/catalog/default/0/"))), 30)
        assert not list((c.home / "objects").glob("catalog/**/*.json"))
        wait_until("every message published", lambda: set(published(c.home)) >= set(ids),
                   30, seen=lambda: len(published(c.home)))
        harness.close()
    assert max(published(c.home).values()) == 1
    states = message_states(c.home, PARTITIONS)
    assert not [m for m in states.values() if m.state == MessageState.UNCERTAIN]
    assert all(states[mid].state == MessageState.PUBLISHED for mid in ids)


@pytest.mark.timeout(90)
def test_a_node_whose_session_ends_lets_go_and_its_shards_move(tmp_path: Path) -> None:
    """When a node's session is over its records vanish, the leader places its shards on
    the other node, which takes them at higher epochs; the first node rejoins and gets its
    share back by planned moves. Every message is published exactly once."""
    with cluster(tmp_path, ["a", "b"]) as c:
        wait_until("every shard active, two on each node", lambda: c.settled()
                   and c.held() == Counter({"a": 2, "b": 2}), 30, seen=c.owners)
        harness = Harness(c.home, c.nodes["a"].engine, PARTITIONS)
        ids = [f"s{n}" for n in range(100)]
        schedule(harness, ids, 500)
        epochs = {shard: epoch for shard, (_, _, epoch) in c.owners().items()}
        b_shards = {shard for shard, (node, _, _) in c.owners().items() if node == "b"}
        session = c.nodes["b"]._session  # the session ends as if the store expired it
        assert session is not None
        session.close()
        wait_until("b's shards taken over or back, at higher epochs",
                   lambda: c.settled() and all(c.owners()[s][2] > epochs[s] for s in b_shards),
                   30, seen=c.owners)
        wait_until("b rejoined and holds its share", lambda: c.settled()
                   and c.held() == Counter({"a": 2, "b": 2}), 30, seen=c.owners)
        wait_until("every message published", lambda: set(published(c.home)) >= set(ids),
                   30, seen=lambda: len(published(c.home)))
        harness.close()
    counts = published(c.home)
    twice = [mid for mid, n in counts.items() if n > 1]
    states = message_states(c.home, PARTITIONS)
    assert not twice or all(states[mid].state == MessageState.PUBLISHED for mid in twice)
    assert all(states[mid].state in (MessageState.PUBLISHED, MessageState.UNCERTAIN)
               for mid in ids)


@pytest.mark.timeout(60)
def test_a_lane_added_to_the_clusters_configuration_reaches_running_nodes(
        tmp_path: Path) -> None:
    """A new revision of the configuration with one more lane is heard through the
    coordinator's notifications: every node starts its publisher without a restart, and
    messages on the new lane are published."""
    with cluster(tmp_path, ["a", "b"]) as c:
        wait_until("every shard active, two on each node", lambda: c.settled()
                   and c.held() == Counter({"a": 2, "b": 2}), 30, seen=c.owners)
        found = c.store.config()
        assert found is not None
        text = found[0].toml + "\n" + file_lane("second", "outbox/second.jsonl")
        c.store.write_config(text, changed_by="test", reason="a second lane", now_ms=now_ms(),
                             expected=found[1])
        wait_until("both engines publish to the new lane",
                   lambda: all("second" in n.engine.publishers for n in c.nodes.values()),
                   20)
        harness = Harness(c.home, c.nodes["a"].engine, PARTITIONS)
        ids = [f"l{n}" for n in range(40)]
        base = now_ms()
        harness.queue([harness.schedule(mid, base + 100, lane="second") for mid in ids])
        second = c.home / "outbox" / "second.jsonl"
        wait_until("every message on the new lane published", lambda: second.exists() and
                   len(second.read_text().splitlines()) >= len(ids), 30)
        harness.close()


@pytest.mark.timeout(60)
def test_any_nodes_admin_socket_serves_every_shard_through_its_owner(tmp_path: Path) -> None:
    """Asked through node a's admin API, commands for every shard are appended and waited
    for (b's shards by b), and a message on b's shard is read from b: per-shard commands
    work from any node's home on one host."""
    with cluster(tmp_path, ["a", "b"]) as c:
        wait_until("every shard active, two on each node", lambda: c.settled()
                   and c.held() == Counter({"a": 2, "b": 2}), 30, seen=c.owners)
        harness = Harness(c.home, c.nodes["a"].engine, PARTITIONS)
        base = now_ms()
        prepared = [harness.schedule(f"x{n}", base + 60_000) for n in range(20)]
        api = NodeApi(c.nodes["a"].engine, c.store, host="localhost")
        answer = api.submit(AppendRequest(records=[
            RecordToAppend(shard=str(p.shard), data=p.data) for p in prepared], wait_ms=10_000))
        assert [r.result for r in answer.receipts] == ["APPLIED"] * 20
        assert {r.shard for r in answer.receipts} == {f"default/{n}" for n in range(4)}
        on_b = next(p for p in prepared if c.owners()[p.shard][0] == "b")
        assert on_b.delay_message_id is not None
        detail = api.message(on_b.delay_message_id)
        assert detail.shard == str(on_b.shard) and detail.state == "SCHEDULED"
        listed = api.messages(shard=str(on_b.shard), state=None, lane=None, limit=100)
        assert on_b.delay_message_id in {m.delay_message_id for m in listed.messages}
        harness.close()
