"""A chaos run's cluster: three node homes on one host sharing the shards of one route
through a coordinator (etcd at 127.0.0.1:2379 or Oxia at 127.0.0.1:6648), the Command
Topic on Kafka, objects (checkpoints, large payloads) in a directory every node shares or,
when the run stops S3, in S3.

The cluster's configuration holds what ``homes.py`` gives a single chaos home — the lanes
``p1``, ``p2`` (plain, faulted by the destination nemeses), ``ord`` (ORDERED) and ``calm``
(healthy), every one on Kafka (a file lane would be one node's own file), the ``[shard]``
inline limit, frequent checkpoints — and each node's ``nereus.toml`` the chaos ``[engine]``
settings with its ``[cluster]``. It is written as ``nereus cluster init`` and ``init
--join`` would (``tests/integration/cluster_homes.make_cluster``). Every run is unique: its
cluster name, topics and object prefix carry a fresh id.

``replay_home`` is a standalone home with the cluster's routes and lanes and other
``[shard]`` limits, where the final collection replays each shard's Command Topic
partition from empty (every input of apply is in the log).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.collect import OTHER_SHARD_LIMITS
from tests.chaos.consumers import Consumer
from tests.chaos.history import LaneInfo
from tests.chaos.homes import FAULTED, HEALTHY, INLINE_LIMIT, ORDERED, Brokers, _lane, _objects
from tests.integration.cluster_homes import ROUTE, Cluster, ClusterSpec, make_cluster
from tests.integration.services import S3Endpoint

COORDINATORS = {"etcd": "127.0.0.1:2379", "oxia": "127.0.0.1:6648"}
NODES = ("n1", "n2", "n3")
PARTITIONS = 4
SESSION_TTL_MS = 4_000
LEASE_MARGIN_MS = 1_000

NODE_ENGINE = """[engine]
workers = 1
evidence_interval_s = 1
stop_timeout_s = 5
claim_ttl_ms = 3000
max_in_flight = 8
lane_in_flight = 4
payload_gc_interval = "0s"
"""


@dataclass(frozen=True, slots=True)
class ChaosClusterSpec(ClusterSpec):
    """``ClusterSpec`` with the chaos lanes, ``[shard]`` limits and objects."""

    lanes_toml: str = ""
    objects_toml: str = ""
    shard_toml: str = f"max_inline_payload_bytes = {INLINE_LIMIT}\n"
    objects_dir: str = ""

    def routes_toml(self, route_id: str) -> str:
        return (f'[routes.{ROUTE}]\nid = "{route_id}"\nlog = "kafka"\n'
                f'bootstrap = "{self.bootstrap}"\ntopic = "{self.command_topic}"\n'
                f"partitions = {self.partitions}\n\n{self.lanes_toml}\n")

    def cluster_toml(self, route_id: str) -> str:
        return (self.routes_toml(route_id) + self.objects_toml
                + "\n[checkpoints]\nevery_records = 120\nevery_seconds = 3\nkeep = 3\n"
                + f"\n[shard]\n{self.shard_toml}")

    def node_toml(self, node_id: str) -> str:
        return (NODE_ENGINE + f'\n[cluster]\ncoordinator = "{self.coordinator}"\n'
                f'node_id = "{node_id}"\nsession_ttl_ms = {self.session_ttl_ms}\n'
                f'lease_margin_ms = {self.lease_margin_ms}\nhost = "127.0.0.1"\n')

    def prepare_objects(self) -> None:
        """The shared directory (S3's bucket is made with the configuration's text)."""
        if self.objects_dir:
            Path(self.objects_dir).mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True, slots=True)
class ChaosCluster:
    """The cluster's homes (no node started), its lanes and their consumers."""

    cluster: Cluster
    coordinator: str
    lanes: list[LaneInfo]
    consumers: list[Callable[[], Consumer]]
    replay_home: Path

    @property
    def spec(self) -> ChaosClusterSpec:
        spec = self.cluster.spec
        assert isinstance(spec, ChaosClusterSpec)
        return spec

    @property
    def shards(self) -> list[str]:
        return [str(shard) for shard in self.spec.shards]

    def home(self, node_id: str) -> Path:
        return self.cluster.home(node_id)


@contextlib.contextmanager
def make_chaos_cluster(root: Path, brokers: Brokers,
                       coordinator: str = "etcd") -> Iterator[ChaosCluster]:
    """A fresh cluster under ``root`` (homes ``root/homes/<node>``) on ``coordinator``
    (``etcd`` or ``oxia``); its coordinator handle closed on exit. ``brokers.kafka`` is
    required; ``brokers.s3``: objects in S3."""
    assert brokers.kafka, "a cluster's Command Topic is on Kafka"
    if coordinator not in COORDINATORS:
        raise ValueError(f"no coordinator {coordinator!r} (known: {', '.join(COORDINATORS)})")
    run = uuid.uuid4().hex[:10]
    lanes: list[LaneInfo] = []
    makers: list[Callable[[], Consumer]] = []
    sections: list[str] = []
    for name in (*FAULTED, *ORDERED, *HEALTHY):
        section, info, maker = _lane(root, name, "kafka", brokers, run)
        sections.append(section)
        lanes.append(info)
        makers.append(maker)
    objects_dir = "" if brokers.s3 is not None else str(root / "objects")
    spec = ChaosClusterSpec(
        run=run, bootstrap=brokers.kafka, etcd=COORDINATORS["etcd"],
        oxia=COORDINATORS["oxia"] if coordinator == "oxia" else None,
        s3=brokers.s3 or S3Endpoint("unused", "", "", ""), partitions=PARTITIONS,
        session_ttl_ms=SESSION_TTL_MS, lease_margin_ms=LEASE_MARGIN_MS,
        lanes_toml="\n".join(sections), objects_toml=_objects_toml(brokers.s3, run, objects_dir),
        objects_dir=objects_dir)
    with make_cluster(root / "homes", spec, list(NODES), []) as cluster:
        replay = root / "replay-home"
        replay.mkdir(parents=True, exist_ok=True)
        (replay / "nereus.toml").write_text(
            spec.routes_toml(_route_id(cluster)) + "\n[shard]\n" + OTHER_SHARD_LIMITS)
        replay.chmod(0o700)
        yield ChaosCluster(cluster, coordinator, lanes, makers, replay)


def _route_id(cluster: Cluster) -> str:
    """The route's id, as the cluster's configuration record says."""
    toml = cluster.store.require_config().toml
    line = next(ln for ln in toml.splitlines() if ln.startswith("id = "))
    return line.split('"')[1]


def _objects_toml(s3: S3Endpoint | None, run: str, directory: str) -> str:
    """``[objects]``: the shared directory, or S3 (its bucket made if need be)."""
    if s3 is None:
        return f'[objects]\nstore = "file"\npath = "{directory}"\n'
    return _objects(s3, run)
