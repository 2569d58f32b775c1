"""A shard's fencing epoch is a counter of its own in the coordinator (``epochs/<shard>``),
incremented by CAS on every take, not the store's version counter: so a cluster that moves
to another coordinator (or a coordinator restored from an older backup) activates every
shard above the epoch its log applied, instead of being refused for ever.

Here too: a take whose answer was lost (the ownership record written on the node's
session, the node never told) is undone and the shard taken again, not held by nobody.

In one process, on the embedded coordinator and one home's file Shard Logs
(``test_cluster_node``'s nodes); no service is needed.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from nereus.adapters.backends.coordination.sqlite import SqliteCoordinator
from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.adapters.time_source import SYSTEM_CLOCK
from nereus.cluster import keys
from nereus.cluster.records import OwnerState
from nereus.config import parse_config
from nereus.engine.hosting.cluster.cluster_node import ClusterNode
from nereus.engine.hosting.cluster.node_settings import NodeSettings
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.process.home_engine import Engine
from nereus.shard import ShardId
from tests.integration.engine_harness import CONFIG, Events, file_lane, now_ms
from tests.integration.test_cluster_node import PARTITIONS, TTL_MS, start_node
from tests.polling import wait_until

SHARDS = [ShardId("default", p) for p in range(PARTITIONS)]


def store_on(path: Path, stack: ExitStack) -> ClusterStore:
    coordinator = SqliteCoordinator(path)
    stack.callback(coordinator.close)
    return ClusterStore(ClusterHandle(f"sqlite://{path}/test", "test", coordinator, "test/"))


def test_each_take_increments_the_shards_own_counter(tmp_path: Path) -> None:
    """The first take of a shard starts its counter at the version that created the
    ownership record (above any epoch the store granted before it had counters); each
    later take is the counter plus one, however many writes the store made in between;
    the counter outlives the ownership record, and each shard has its own."""
    with ExitStack() as stack:
        store = store_on(tmp_path / "c.db", stack)
        session = store.handle.coordinator.create_session(10_000, client_identity="n1")
        stack.callback(session.close)
        taken = store.take(session, SHARDS[0], node_id="n1", owner_id="o1", now_ms=1)
        assert taken is not None
        first = taken.record.epoch
        assert first == store.epochs()[SHARDS[0]].epoch
        assert store.release(SHARDS[0], taken)
        for i in range(50):  # the store's versions move on
            store.handle.coordinator.put(f"test/noise/{i}", b"x")
        again = store.take(session, SHARDS[0], node_id="n1", owner_id="o2", now_ms=2)
        assert again is not None and again.record.epoch == first + 1
        assert store.take(session, SHARDS[0], node_id="n2", owner_id="o3", now_ms=3) is None
        other = store.take(session, SHARDS[1], node_id="n1", owner_id="o1", now_ms=4)
        assert other is not None and other.record.epoch > first + 1
        counters = store.epochs()
        assert (counters[SHARDS[0]].epoch, counters[SHARDS[0]].owner_id) == (first + 1, "o2")
        assert counters[SHARDS[1]].epoch == other.record.epoch


def test_raising_the_counter_puts_the_next_take_above_it_and_never_lowers_it(
        tmp_path: Path) -> None:
    """raise_epoch(shard, E) makes the next take E + 1; raising to less than the counter
    changes nothing."""
    with ExitStack() as stack:
        store = store_on(tmp_path / "c.db", stack)
        session = store.handle.coordinator.create_session(10_000, client_identity="n1")
        stack.callback(session.close)
        assert store.raise_epoch(SHARDS[2], 7_000, node_id="n1", now_ms=1) == 7_000
        assert store.raise_epoch(SHARDS[2], 5, node_id="n1", now_ms=2) == 7_000
        taken = store.take(session, SHARDS[2], node_id="n1", owner_id="o1", now_ms=3)
        assert taken is not None and taken.record.epoch == 7_001
        record = store.handle.coordinator.get("test/" + keys.epoch_key(SHARDS[2]))
        assert not record.version.is_ephemeral


@pytest.mark.timeout(120)
def test_a_cluster_moved_to_a_fresh_coordinator_activates_every_shard_above_its_epoch(
        tmp_path: Path) -> None:
    """A node runs every shard on coordinator A (whose versions are in the thousands), then
    the cluster's home runs on a fresh coordinator B, whose takes grant small epochs: each
    activation refuses its grant (not above the applied epoch), the node raises the
    shard's counter to the applied epoch (``shard_epoch_raised``) and takes it again, and
    every shard is ACTIVE on B at an epoch above the one it had on A."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    text = CONFIG.format(partitions=PARTITIONS, lanes=file_lane("local", "outbox/local.jsonl"))
    (home / "nereus.toml").write_text(text)
    before: dict[ShardId, int] = {}
    with ExitStack() as stack:
        a = store_on(tmp_path / "a.db", stack)
        for i in range(2_000):  # A's versions, and so its first epochs, are large
            a.handle.coordinator.put(f"test/noise/{i}", b"x")
        a.write_config(text, changed_by="test", reason="A", now_ms=now_ms(), expected=None)
        start_node(home, a.handle, "n1", stack)
        wait_until("every shard ACTIVE on A", lambda: _active(a) == set(SHARDS), 60,
                   seen=a.owners)
        before = {shard: owned.record.epoch for shard, owned in a.owners().items()}
    assert min(before.values()) > 2_000, before
    events = Events()
    with ExitStack() as stack:
        b = store_on(tmp_path / "b.db", stack)
        b.write_config(text, changed_by="test", reason="B", now_ms=now_ms(), expected=None)
        start_node(home, b.handle, "n1", stack, events=events)
        wait_until("every shard ACTIVE on B", lambda: _active(b) == set(SHARDS), 60,
                   seen=b.owners)
        after = {shard: owned.record.epoch for shard, owned in b.owners().items()}
        assert all(after[shard] > before[shard] for shard in SHARDS), (before, after)
        raised = {fields["shard"]: fields for fields in events.named("shard_epoch_raised")}
        assert set(raised) == {str(shard) for shard in SHARDS}
        assert all(int(str(raised[str(s)]["applied"])) == before[s] for s in SHARDS), raised
        assert {s: e.epoch for s, e in b.epochs().items()} == after


def _active(store: ClusterStore) -> set[ShardId]:
    return {shard for shard, owned in store.owners().items()
            if owned.record.state == OwnerState.ACTIVE}


@pytest.mark.timeout(60)
def test_a_take_whose_answer_was_lost_is_undone_and_taken_again(tmp_path: Path) -> None:
    """An ownership record on the node's own session that the node does not hold (the
    coordinator wrote the take, the answer ran out of its deadline) is deleted by the
    node's next round (``shard_take_undone``) and the shard is taken and ACTIVE after the
    one that follows; every other shard is taken meanwhile."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    text = CONFIG.format(partitions=PARTITIONS, lanes=file_lane("local", "outbox/local.jsonl"))
    (home / "nereus.toml").write_text(text)
    events = Events()
    with ExitStack() as stack:
        store = store_on(tmp_path / "c.db", stack)
        store.write_config(text, changed_by="test", reason="lost take", now_ms=now_ms(),
                           expected=None)
        engine = Engine(home, parse_config(text, source="test"), log_event=events,
                        settings=EngineSettings(), catalog=store.handle)
        engine.start(owned=())
        stack.callback(engine.stop)
        node = ClusterNode(engine, store, NodeSettings(
            node_id="n1", host="localhost", address=f"{home}/run/n1.sock",
            session_ttl_ms=TTL_MS, lease_margin_ms=500, interval_s=0.2),
            clock=SYSTEM_CLOCK, events=engine.log_event)
        node.join()
        stack.callback(node.leave)
        session = node._session
        assert session is not None
        lost = store.take(session, SHARDS[0], node_id="n1", owner_id=engine.owner_id,
                          now_ms=now_ms())
        assert lost is not None
        node.reconcile()  # leads, places every shard here, takes the others, undoes SHARDS[0]
        assert [e["shard"] for e in events.named("shard_take_undone")] == [str(SHARDS[0])]
        assert SHARDS[0] not in store.owners()
        node.reconcile()
        assert _active(store) == set(SHARDS)
        assert store.owners()[SHARDS[0]].record.epoch == lost.record.epoch + 1
        node.stop_reconciling()

