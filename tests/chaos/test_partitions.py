"""Partitions, not only crashes (issue 40): three nodes on three addresses of their own
(network namespaces made by the test: ``tests/integration/netns.py``), one of them cut off
from the coordinator, or from the Command Topic's broker, then healed, under steady load;
each run recorded as a chaos history and judged by ``tests/chaos/checker.py``
(``partitions.py``).

* **Cut from the coordinator** (Oxia, and etcd): the node cannot renew its session, so
  its lease is certain only until its last acknowledged keep-alive plus the TTL; it makes
  no producer call after that instant less the margin, by its own clock, whatever the
  coordinator says (it cannot hear it). Measured: from the cut to the node's last producer
  call, against the TTL and against when the coordinator ended its session (the member
  record gone). Its shards are ACTIVE on the others; once healed, it joins again with a
  new session and owns shards again.
* **Cut from the broker** (the Command Topic's, which is also the destination's): the node
  keeps its session and its shards, which stall; once healed they catch up.

In both, the history holds no violation: every acknowledged schedule applied once,
nothing published before it was due, no attempt published twice, every message ends
consistent with the destination.

Needs root (network namespaces and veth pairs, all removed at the end) and the servers'
binaries of ``scripts/services`` (fetched if missing); skipped, saying why, where
namespaces cannot be made. ``serial``: it runs its own servers and its timing is measured.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nereus.shard import ShardId
from tests.chaos.checker import Facts
from tests.chaos.client import Recorder
from tests.chaos.consumers import Consumers, KafkaConsumer
from tests.chaos.partitions import (
    FaultLog,
    HistoryWriter,
    NetSpec,
    RecordedLoad,
    Watch,
    collect,
    destination,
    judged,
    now_ms,
    producer_calls,
    run_started,
)
from tests.daemon import owned_processes
from tests.integration.cluster_checks import settle
from tests.integration.cluster_homes import LANE, Cluster, make_cluster
from tests.integration.kafka_topic import create_topic
from tests.integration.netns import Network, partition_network, unavailable
from tests.integration.netns_services import private_etcd, private_kafka, private_oxia
from tests.integration.services import S3Endpoint
from tests.polling import wait_until

NODES = ["n1", "n2", "n3"]
TTL_MS = 4_000
MARGIN_MS = 1_000

# the servers are private, but their binaries are those of `scripts/services`: a lane
# without Kafka, Oxia or etcd leaves this out as it leaves out their other tests
pytestmark = [pytest.mark.serial, pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.kafka, pytest.mark.oxia, pytest.mark.etcd]


@dataclass(frozen=True)
class Servers:
    net: Network
    bootstrap: str
    oxia: str
    etcd: str


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The namespaces and the private Kafka, Oxia and etcd in them, for the module; all of
    it removed at the end whatever happened."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"partition tests make network namespaces: {reason}")
    root = tmp_path_factory.mktemp("partition-servers")
    with partition_network(NODES) as net, private_kafka(net, root / "kafka") as bootstrap, \
            private_oxia(net, root / "oxia") as oxia, private_etcd(net, root / "etcd") as etcd:
        yield Servers(net, bootstrap, oxia, etcd)


@dataclass
class PartitionRun:
    """One recorded cluster run on the partition network."""

    servers: Servers
    cluster: Cluster
    load: RecordedLoad
    recorder: Recorder
    faults: FaultLog
    history: Path
    consumers: Consumers
    notes: list[str] = field(default_factory=list)

    @property
    def net(self) -> Network:
        return self.servers.net

    def finish(self) -> None:
        """Stop the load, settle (every shard ACTIVE, nothing left due), stop the nodes."""
        self.load.stop()
        settle(self.cluster, self.load, 90)
        self.cluster.stop_all()
        wait_until("the destination consumer quiet", lambda: now_ms() -
                   self.consumers.last_ms > 1_000, 30, interval_s=0.1)


@contextmanager
def partition_run(servers: Servers, tmp_path: Path, coordinator: str,
                  nemesis: str) -> Iterator[PartitionRun]:
    """A fresh cluster of three nodes, each in its namespace, every shard ACTIVE and every
    node owning one; load running and recorded. On exit (after ``finish``), the final state
    goes into the history."""
    net = servers.net
    spec = NetSpec(run=uuid.uuid4().hex[:10], bootstrap=servers.bootstrap, etcd=servers.etcd,
                   oxia=servers.oxia if coordinator == "oxia" else None,
                   s3=S3Endpoint("unused", "", "", ""), session_ttl_ms=TTL_MS,
                   lease_margin_ms=MARGIN_MS, objects_dir=str(tmp_path / "objects"),
                   hosts=tuple((node, net.node_address(node)) for node in NODES))
    create_topic(spec.bootstrap, spec.topic)
    history = tmp_path / "history.jsonl"
    with ExitStack() as stack:
        owned = stack.enter_context(owned_processes())
        cluster = stack.enter_context(make_cluster(tmp_path / "homes", spec, NODES, owned))
        for node in NODES:
            cluster.start(node, prefix=net.enter(net.node_ns(node)))
        cluster.wait_all_active(90, on=set(NODES))
        wait_until("every node owns a shard", lambda: set(cluster.active_owners().values())
                   == set(NODES), 60, seen=cluster.active_owners)
        writer = HistoryWriter(history)
        recorder = Recorder(writer)
        recorder.write(run_started(spec, [nemesis]))
        consumers = stack.enter_context(Consumers(recorder, [
            lambda: KafkaConsumer(LANE, spec.bootstrap, spec.topic)]))
        load = RecordedLoad(spec, stack.enter_context(spec.logs()), rate=100,
                            recorder=recorder)
        load.start()
        run = PartitionRun(servers, cluster, load, recorder, FaultLog(recorder), history,
                           consumers)
        try:
            yield run
        finally:
            load.stop()
            for node, address in list(net.cuts):
                net.heal(node, address)
        stack.close()  # consumers, the load's logs, nodes and the test's own store first
        try:
            collect(cluster, recorder, quiesced=True, faults=recorder.faults, notes=run.notes)
        finally:
            writer.close()


def _owns_active(cluster: Cluster, node: str) -> bool:
    return node in cluster.active_owners().values()


def _publishing(cluster: Cluster, shards: set[ShardId]) -> None:
    """Until a message of ``shards`` reached the destination (their owner publishes)."""
    route = cluster.spec.route
    wait_until("the node to be cut publishing", lambda: any(
        route.shard_for(r.delay_message_id) in shards for r in destination(cluster.spec)),
        30, interval_s=0.2)


def _complete(facts: Facts, run: PartitionRun) -> None:
    """The history is whole: every shard's log and every acknowledged schedule's message
    are in it (a check over an empty history would pass)."""
    assert set(facts.records) == {str(s) for s in run.cluster.spec.shards}, set(facts.records)
    assert set(run.load.deliver) <= set(facts.messages), \
        len(set(run.load.deliver) - set(facts.messages))
    assert facts.end is not None and facts.seen


@pytest.mark.parametrize("coordinator", ["oxia", "etcd"])
def test_a_node_cut_from_the_coordinator_stops_publishing_before_its_lease_can_end(
        servers: Servers, tmp_path: Path, coordinator: str) -> None:
    """Cut one node from the coordinator for twice the TTL under load, then heal: its last
    producer call after the cut comes less than a TTL after it, and before the coordinator
    ended its session; its shards are ACTIVE on the other nodes meanwhile; healed, it
    joins again and owns shards; the history holds no violation."""
    with partition_run(servers, tmp_path, coordinator, "coordinator-cut") as run:
        cluster, net = run.cluster, run.net
        run.load.acknowledged(300)
        owners = cluster.active_owners()
        victim = owners[min(owners, key=str)]
        others = set(NODES) - {victim}
        pid = cluster.nodes[victim].proc.pid
        _publishing(cluster, {s for s, n in owners.items() if n == victim})
        expired = Watch(lambda: victim not in cluster.store.members())
        cut_ms = run.faults.start("coordinator-cut", f"{victim} ({net.node_address(victim)}) "
                                  f"from {coordinator} at {net.coordinator_address}")
        net.cut(victim, net.coordinator_address)
        cluster.wait_all_active(TTL_MS / 1000 + 30, on=others)
        moved_ms = now_ms()
        time.sleep(max(0.0, (cut_ms + 2 * TTL_MS - now_ms()) / 1000))  # the cut itself
        heal_ms = run.faults.heal("coordinator-cut", f"{victim} healed")
        net.heal(victim, net.coordinator_address)
        wait_until(f"{victim} owning an ACTIVE shard again",
                   lambda: _owns_active(cluster, victim), 90, interval_s=0.1,
                   seen=cluster.active_owners)
        rejoined_ms = now_ms()
        expired.close()
        run.load.acknowledged(300)
        run.finish()
    facts, violations = judged(run.history)
    calls = producer_calls(facts, destination(cluster.spec), pid)
    before = [t for t in calls if t < cut_ms]
    during = [t for t in calls if cut_ms <= t < heal_ms]
    after = [t for t in calls if t >= heal_ms]
    last = max(during or before or [cut_ms])
    print(f"\n[{coordinator}] {victim} cut at {cut_ms}: last producer call "
          f"{last - cut_ms} ms after the cut ({len(during)} calls during it; TTL {TTL_MS} ms, "
          f"margin {MARGIN_MS} ms); session ended (member record gone) "
          f"{None if expired.at_ms is None else expired.at_ms - cut_ms} ms after the cut "
          f"({None if expired.at_ms is None else expired.at_ms - last} ms after that call); "
          f"its shards ACTIVE elsewhere {moved_ms - cut_ms} ms after; healed after "
          f"{heal_ms - cut_ms} ms, owning an ACTIVE shard again {rejoined_ms - heal_ms} ms "
          f"after the heal; {len(after)} calls after it; "
          f"{len(facts.ops)} ops, {len(facts.seen)} records seen; "
          f"history {run.history}")
    assert violations == [], "\n".join(v.render() for v in violations[:20])
    _complete(facts, run)
    assert before, f"{victim} published nothing before the cut: nothing to measure"
    assert last - cut_ms < TTL_MS, (last - cut_ms, during)
    assert expired.at_ms is not None and last < expired.at_ms, (last, expired.at_ms)
    assert after, f"{victim} published nothing after it rejoined"


def test_a_node_cut_from_the_broker_keeps_its_shards_and_catches_up_when_healed(
        servers: Servers, tmp_path: Path) -> None:
    """Cut one node from the Command Topic's broker (also the destination's) for three
    TTLs under load, then heal: it keeps its session throughout (its shards stall, nobody
    else takes them), and once healed its shards catch up and it publishes again; the
    history holds no violation."""
    with partition_run(servers, tmp_path, "oxia", "broker-cut") as run:
        cluster, net = run.cluster, run.net
        run.load.acknowledged(300)
        owners = cluster.active_owners()
        victim = owners[min(owners, key=str)]
        pid = cluster.nodes[victim].proc.pid
        session = cluster.store.handle.coordinator.get(
            cluster.store.key(f"nodes/{victim}")).version.session_id
        cut_ms = run.faults.start("broker-cut", f"{victim} ({net.node_address(victim)}) "
                                  f"from Kafka at {net.broker_address}")
        net.cut(victim, net.broker_address)
        time.sleep(max(0.0, (cut_ms + 3 * TTL_MS - now_ms()) / 1000))  # the cut itself
        kept = cluster.store.handle.coordinator.get(
            cluster.store.key(f"nodes/{victim}")).version.session_id
        heal_ms = run.faults.heal("broker-cut", f"{victim} healed")
        net.heal(victim, net.broker_address)
        run.load.acknowledged(300)
        run.finish()
        caught_up_ms = now_ms()
    facts, violations = judged(run.history)
    calls = producer_calls(facts, destination(cluster.spec), pid)
    during = [t for t in calls if cut_ms <= t < heal_ms]
    after = [t for t in calls if t >= heal_ms]
    print(f"\n{victim} cut from the broker for {heal_ms - cut_ms} ms: session kept "
          f"{kept == session}; {len(during)} producer calls stamped during the cut, "
          f"{len(after)} after; first call after the heal "
          f"{None if not after else after[0] - heal_ms} ms after it; settled "
          f"{caught_up_ms - heal_ms} ms after the heal; {len(facts.seen)} records seen; "
          f"history {run.history}")
    assert violations == [], "\n".join(v.render() for v in violations[:20])
    _complete(facts, run)
    assert kept == session, "the node lost its session while only the broker was cut"
    assert after, f"{victim} published nothing after the heal"
