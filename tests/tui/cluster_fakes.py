"""Fixed cluster records for the cluster screen's tests: a three-node cluster with a move
in progress, a shard recovering and one unowned, and a source that replays such views (or
fails like a coordinator that does not answer) instead of reading a coordinator.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from nereus.adapters.cluster.cluster_store import ClusterView
from nereus.cluster.records import (
    ClusterConfig,
    Drain,
    Leader,
    Member,
    OwnerRecord,
    OwnerState,
    Placement,
)
from nereus.coordination.errors import CoordinatorUnavailable
from nereus.shard import ShardId
from nereus.tui.cluster_source import ClusterReading

COORDINATOR = "etcd://127.0.0.1:2379/prod"
CLUSTER_TOML = '[routes.default]\nlog = "kafka"\npartitions = 4\nbootstrap = "127.0.0.1:9092"\n'


def _member(node_id: str) -> Member:
    return Member(node_id=node_id, host="host-a", address=f"/srv/{node_id}/run/admin.sock",
                  capacity=1)


def _owner(shard: ShardId, node_id: str, state: OwnerState, epoch: int) -> OwnerRecord:
    return OwnerRecord(shard=f"{shard.route}:{shard.partition}", node_id=node_id,
                       owner_id=f"{node_id}:1", state=state, epoch=epoch)


def _placed(shard: ShardId, node_id: str, *, pinned: bool = False) -> Placement:
    return Placement(shard=f"{shard.route}:{shard.partition}", node_id=node_id,
                     pinned=pinned, reason="balance")


S0, S1, S2, S3 = (ShardId("default", n) for n in range(4))


def moving_view() -> ClusterView:
    """n1 leads and holds default/0 ACTIVE and default/1 RELEASING towards n2 (a pinned
    move); n2 recovers default/2; nobody owns default/3 (placed on n3, which is draining)."""
    return ClusterView(
        config=ClusterConfig(toml=CLUSTER_TOML, revision=3),
        members={"n1": _member("n1"), "n2": _member("n2"), "n3": _member("n3")},
        leader=Leader(node_id="n1"),
        placements={S0: _placed(S0, "n1"), S1: _placed(S1, "n2", pinned=True),
                    S2: _placed(S2, "n2"), S3: _placed(S3, "n3")},
        owners={S0: _owner(S0, "n1", OwnerState.ACTIVE, 11),
                S1: _owner(S1, "n1", OwnerState.RELEASING, 12),
                S2: _owner(S2, "n2", OwnerState.RECOVERING, 17)},
        drains={"n3": Drain(node_id="n3", operator="ops", reason="kernel update")})


def settled_view() -> ClusterView:
    """The same cluster once the moves are done: every shard ACTIVE where it is placed,
    n3 drained and stopped (named only by its drain)."""
    return ClusterView(
        config=ClusterConfig(toml=CLUSTER_TOML, revision=3),
        members={"n1": _member("n1"), "n2": _member("n2")},
        leader=Leader(node_id="n1"),
        placements={S0: _placed(S0, "n1"), S1: _placed(S1, "n2", pinned=True),
                    S2: _placed(S2, "n2"), S3: _placed(S3, "n1")},
        owners={S0: _owner(S0, "n1", OwnerState.ACTIVE, 11),
                S1: _owner(S1, "n2", OwnerState.ACTIVE, 19),
                S2: _owner(S2, "n2", OwnerState.ACTIVE, 17),
                S3: _owner(S3, "n1", OwnerState.ACTIVE, 20)},
        drains={"n3": Drain(node_id="n3", operator="ops", reason="kernel update")})


class FakeClusterSource:
    """Answers each read with the next view (the last one again once they run out); a
    view of None is a coordinator that does not answer. Counts reads and closes."""

    where = COORDINATOR

    def __init__(self, views: Sequence[ClusterView | None], *, node_id: str | None = "n2") -> None:
        self.views = list(views)
        self._node_id = node_id
        self.reads = 0
        self.closes = 0
        self.lock = threading.Lock()

    @property
    def node_id(self) -> str | None:
        return self._node_id

    def read(self) -> ClusterReading:
        with self.lock:
            view = self.views[min(self.reads, len(self.views) - 1)]
            self.reads += 1
        if view is None:
            raise CoordinatorUnavailable(f"etcd at {COORDINATOR}: range failed: connection "
                                         "refused", hint="is etcd running?")
        return ClusterReading(cluster="prod", coordinator=COORDINATOR, view=view)

    def close(self) -> None:
        with self.lock:
            self.closes += 1
