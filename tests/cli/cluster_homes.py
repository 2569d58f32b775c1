"""A cluster for CLI tests on the embedded coordinator (no service): its configuration
file, and nodes simulated in the test process (a session, a member record, ownership
records) so that ``nereus cluster status`` and the moves see live nodes without engines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from nereus.adapters.cluster.cluster_store import ClusterStore, Owned
from nereus.adapters.cluster.coordinator_url import open_cluster, sqlite_url
from nereus.adapters.cluster.route_keys import share_route_keys
from nereus.cluster.records import Member, OwnerState
from nereus.coordination.protocol import Session
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.polling import now_ms

CLUSTER_TOML = """
[routes.default]
id = "cluster-route"
log = "kafka"
partitions = {partitions}
bootstrap = "127.0.0.1:9092"

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"

[objects]
store = "file"
path = "{objects}"
"""


def cluster_file(directory: Path, *, partitions: int = 4) -> Path:
    """A cluster configuration: route ``default`` on Kafka, lane ``local``, shared objects."""
    path = directory / "cluster.toml"
    path.write_text(CLUSTER_TOML.format(partitions=partitions, objects=directory / "objects"))
    return path


def initialised_cluster(directory: Path, *, partitions: int = 4, cli: bool = False) -> str:
    """The URL of a cluster on ``directory/coord.db`` whose configuration is written: by
    ``nereus cluster init`` with ``cli``, else straight into the coordinator (as that
    command does, without a process)."""
    url = sqlite_url(directory / "coord.db", "test")
    source = cluster_file(directory, partitions=partitions)
    if cli:
        written = run_nereus("--json", "cluster", "init", "--coordinator", url, "--from",
                             str(source), "--reason", "first", home=directory / "operator")
        assert written.code == 0, written.stderr
        return url
    handle = open_cluster(url)
    try:
        store = ClusterStore(handle)
        store.write_config(source.read_text(), changed_by="test", reason="first",
                           now_ms=now_ms(), expected=None)
        share_route_keys(store, ["default"], now_ms=now_ms(), made_by="test")
    finally:
        handle.close()
    return url


@dataclass
class SimNode:
    """A node as its records show it: a session, maybe a member record, shards it owns."""

    store: ClusterStore
    node_id: str
    session: Session
    owned: dict[ShardId, Owned] = field(default_factory=dict)

    def own(self, shard: str, state: OwnerState = OwnerState.ACTIVE) -> None:
        target = ShardId.parse(shard)
        owned = self.store.take(self.session, target, node_id=self.node_id,
                                owner_id=f"owner-{self.node_id}", now_ms=now_ms())
        assert owned is not None, f"{shard} is owned already"
        if state != OwnerState.RECOVERING:
            owned = self.store.update_owner(self.session, target, owned, state=state)
        self.owned[target] = owned

    def release(self, shard: str) -> None:
        target = ShardId.parse(shard)
        assert self.store.release(target, self.owned.pop(target))


@dataclass
class SimCluster:
    store: ClusterStore

    def node(self, node_id: str, *, member: bool = True, capacity: int = 1) -> SimNode:
        """A node with a live session; ``member`` False: no member record (not alive)."""
        session = self.store.handle.coordinator.create_session(
            10_000, client_identity=f"test-{node_id}")
        if member:
            self.store.register(session, Member(node_id=node_id, host="test-host",
                                                address=f"/nodes/{node_id}/run/admin.sock",
                                                capacity=capacity))
        return SimNode(self.store, node_id, session)

    def lead(self, node: SimNode) -> None:
        assert self.store.try_lead(node.session, node.node_id, now_ms=now_ms())


@contextmanager
def simulated(url: str) -> Iterator[SimCluster]:
    """Simulated nodes of the cluster at ``url``; their records go when this ends."""
    handle = open_cluster(url)
    try:
        yield SimCluster(ClusterStore(handle))
    finally:
        handle.close()
