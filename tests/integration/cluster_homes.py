"""A cluster of node daemons on one machine, on the session's real services: the Command
Topic and the destination lane on Kafka, checkpoints in S3, the coordinator in etcd (or in
Oxia: ``ClusterSpec.oxia``).

``make_cluster`` writes what ``nereus cluster init`` and ``nereus init --join`` would (this
harness does not depend on those commands): the cluster's configuration record in the
coordinator (``ClusterStore.write_config``), one home per node whose ``nereus.toml`` holds
only ``[engine]`` and ``[cluster]``, the route's evidence key copied into every home (each
node must verify the others' evidence), and the Command Topic with the route identity in
every partition (``nereus init`` claims a broker log the same way). Every run is unique:
its topics, its S3 prefix and its cluster name carry a fresh id.

``Cluster.start(node)`` runs ``python -m nereus.engine.hosting.daemon --home H`` as a child the
test owns (``owned_processes`` kills what is left); a node is signalled by its process
(SIGKILL, SIGSTOP/SIGCONT, SIGTERM). Waits are on the coordinator's records (every shard's
owner ACTIVE) through a ``ClusterStore`` of the test's own.

``Load`` keeps schedules flowing into the Command Topic from a thread it owns, each due
0-3 s after it is queued; only what the log acknowledged is counted as scheduled.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
from nereus.adapters.backends.shardlog.identity import ensure_route_identity
from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.coordinator_url import open_cluster
from nereus.adapters.home.route_secrets import key_path, route_key
from nereus.client import RouteRef, prepare_schedule, queue
from nereus.cluster.records import OwnerRecord, OwnerState
from nereus.config import parse_config
from nereus.coordination.records import prefix_range
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from tests.daemon import exit_status, process_stopped
from tests.integration.services import S3Endpoint
from tests.integration.shard_logs import ShardLogs
from tests.polling import now_ms, wait_until

ROUTE = "default"
LANE = "out"
BUCKET = "nereus-cluster-tests"


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Where one test's cluster lives (every name carries the run's id)."""

    run: str
    bootstrap: str
    etcd: str  # HOST:PORT of etcd, the coordinator unless ``oxia`` is set
    s3: S3Endpoint
    partitions: int = 6
    session_ttl_ms: int = 4_000
    lease_margin_ms: int = 1_000
    oxia: str | None = None  # HOST:PORT of Oxia: the coordinator is Oxia instead
    standby: bool = True  # nodes keep warm copies of the shards they stand by for
    cluster_tls: str = ""  # more [cluster] lines of every node (the coordinator's TLS)

    @property
    def command_topic(self) -> str:
        return f"nereus.cluster-{self.run}.commands"

    @property
    def topic(self) -> str:
        return f"cluster-out-{self.run}"

    @property
    def coordinator(self) -> str:
        if self.oxia is not None:
            return f"oxia://{self.oxia}/c{self.run}"
        return f"etcd://{self.etcd}/c{self.run}"

    @property
    def route(self) -> RouteRef:
        return RouteRef(ROUTE, self.partitions)

    @property
    def shards(self) -> list[ShardId]:
        return [ShardId(ROUTE, p) for p in range(self.partitions)]

    def cluster_toml(self, route_id: str) -> str:
        """The cluster's configuration: route, lane, object store, checkpoints."""
        s3 = self.s3
        return (f'[routes.{ROUTE}]\nid = "{route_id}"\nlog = "kafka"\n'
                f'bootstrap = "{self.bootstrap}"\ntopic = "{self.command_topic}"\n'
                f"partitions = {self.partitions}\n\n"
                f'[lanes.{LANE}]\ndestination = "kafka"\nbootstrap = "{self.bootstrap}"\n'
                f'topic = "{self.topic}"\n\n'
                f'[objects]\nstore = "s3"\nbucket = "{BUCKET}"\nprefix = "{self.run}/"\n'
                f'endpoint = "{s3.endpoint_url}"\nregion = "{s3.region}"\n'
                f'access_key_id = "{s3.access_key_id}"\n'
                f'secret_access_key = "{s3.secret_access_key}"\n\n'
                "[checkpoints]\nevery_records = 20000\nevery_seconds = 30\n")

    def node_toml(self, node_id: str) -> str:
        """A node's own file: ``[engine]`` (the node's payload collection every 3 s) and
        ``[cluster]`` only."""
        return ("[engine]\nevidence_interval_s = 1\nstop_timeout_s = 5\n"
                'payload_gc_interval = "3s"\n\n'
                f'[cluster]\ncoordinator = "{self.coordinator}"\nnode_id = "{node_id}"\n'
                f"session_ttl_ms = {self.session_ttl_ms}\n"
                f"lease_margin_ms = {self.lease_margin_ms}\nhost = \"127.0.0.1\"\n"
                + ("" if self.standby else "standby = false\n") + self.cluster_tls)

    def logs(self) -> ShardLogs:
        return ShardLogs(lambda shard: KafkaShardLog(
            self.bootstrap, self.command_topic, shard.partition,
            partitions=self.partitions, create=False))

    def store(self) -> ClusterStore:
        return ClusterStore(open_cluster(self.coordinator))

    def prepare_objects(self) -> None:
        """Make what the configuration's ``[objects]`` needs (the S3 bucket)."""
        ensure_bucket(self.s3)


def ensure_bucket(s3: S3Endpoint) -> None:
    client = s3.client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou,
                             client.exceptions.BucketAlreadyExists):
        client.create_bucket(Bucket=BUCKET)


class NodeRun:
    """One run of a node's daemon, a child process of the test."""

    def __init__(self, home: Path, node_id: str, run: int,
                 owned: list[subprocess.Popen[bytes]], *, workers: int = 1,
                 prefix: Sequence[str] = ()) -> None:
        from nereus.adapters.admin.admin_client import AdminClient

        self.home = home
        self.node_id = node_id
        self.out_path = HomeLayout(home).logs / f"daemon-{run}.out"
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "nereus.engine.hosting.daemon", "--home", str(home),
                 "--workers", str(workers)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        owned.append(self.proc)
        self.admin = AdminClient(HomeLayout(home).run / "admin.sock", timeout=10)

    @property
    def owner_prefix(self) -> str:
        """How this run's engine owner id starts (``<host>:<pid>:...``)."""
        return f":{self.proc.pid}:"

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")[-3_000:]

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def pause(self) -> None:
        """SIGSTOP, and return once every thread of the process is stopped: a producer call
        that began before then may still stamp its record after the signal was sent."""
        self.signal(signal.SIGSTOP)
        wait_until(f"{self.node_id} stopped by SIGSTOP",
                   lambda: process_stopped(self.proc.pid), 10)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait: the daemon's exit status."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        return self.exit_status(timeout_s)

    def exit_status(self, timeout_s: float) -> int:
        """Its exit status once it has stopped, or its threads' stacks if it does not."""
        return exit_status(self.proc, self.out_path, timeout=timeout_s,
                           what=f"node {self.node_id}")


@dataclass
class Cluster:
    """The homes of one test's nodes and the runs of their daemons."""

    spec: ClusterSpec
    root: Path
    owned: list[subprocess.Popen[bytes]]
    store: ClusterStore
    nodes: dict[str, NodeRun] = field(default_factory=dict)
    _runs: int = 0

    def home(self, node_id: str) -> Path:
        return self.root / node_id

    def start(self, node_id: str, *, workers: int = 1, prefix: Sequence[str] = ()) -> NodeRun:
        """Start the node's daemon (the front door of ``workers`` processes if above 1);
        ``prefix`` runs it through a command that execs it (``nsenter`` into a network
        namespace: the process is the daemon's)."""
        self._runs += 1
        run = self.nodes[node_id] = NodeRun(self.home(node_id), node_id, self._runs,
                                            self.owned, workers=workers, prefix=prefix)
        return run

    def owners(self) -> dict[ShardId, OwnerRecord]:
        return {shard: owned.record for shard, owned in self.store.owners().items()}

    def active_owners(self) -> dict[ShardId, str]:
        """Each shard whose owner says ACTIVE under the session its node is a member with
        now: the owner's node (a record an ended session left behind does not count)."""
        low, high = prefix_range(self.store.key("nodes/"))
        sessions = {record.key.rpartition("/")[2]: record.version.session_id
                    for record in self.store.handle.coordinator.range_scan(low, high)}
        return {shard: owned.record.node_id for shard, owned in self.store.owners().items()
                if owned.record.state == OwnerState.ACTIVE
                and sessions.get(owned.record.node_id) == owned.version.session_id}

    def check_alive(self) -> None:
        for node in self.nodes.values():
            if node.proc.poll() is not None and node.proc.returncode not in (
                    -signal.SIGKILL, 0):
                raise AssertionError(f"node {node.node_id} exited {node.proc.returncode}:\n"
                                     f"{node.output()}")

    def wait_all_active(self, deadline_s: float, *, on: set[str] | None = None) -> float:
        """Until every shard has an ACTIVE owner (on one of ``on``, if given); when."""
        def done() -> bool:
            self.check_alive()
            active = self.active_owners()
            return len(active) == self.spec.partitions and (
                on is None or set(active.values()) <= on)
        wait_until("every shard ACTIVE" + ("" if on is None else f" on {sorted(on)}"),
                   done, deadline_s, interval_s=0.05,
                   seen=lambda: {str(s): (r.node_id, r.state) for s, r in self.owners().items()})
        return time.monotonic()

    def stop_all(self) -> None:
        """SIGTERM every live node at once (one by one, each stop would hand its shards to
        the others first), then wait for each; each must exit 0."""
        live = [node for node in self.nodes.values() if node.proc.poll() is None]
        for node in live:
            node.signal(signal.SIGCONT)
            node.signal(signal.SIGTERM)
        for node in live:
            code = node.exit_status(60)
            assert code == 0, f"{node.node_id} exited {code}:\n{node.output()}"


def _claim_topic(spec: ClusterSpec, route_id: str) -> None:
    """The Command Topic made, the route identity the first record of each partition."""
    config = parse_config(spec.cluster_toml(route_id), source="cluster")
    route = config.routes[ROUTE]
    for partition in range(spec.partitions):
        log = KafkaShardLog(spec.bootstrap, spec.command_topic, partition,
                            partitions=spec.partitions, create=True)
        try:
            ensure_route_identity(log, route.identity(partition), where=spec.command_topic)
        finally:
            log.close()


@contextlib.contextmanager
def make_cluster(root: Path, spec: ClusterSpec, nodes: list[str],
                 owned: list[subprocess.Popen[bytes]]) -> Iterator[Cluster]:
    """The cluster's record, topic and node homes (no daemon started); closed on exit."""
    spec.prepare_objects()
    route_id = uuid.uuid4().hex
    _claim_topic(spec, route_id)
    store = spec.store()
    store.write_config(spec.cluster_toml(route_id), changed_by="test", reason="harness",
                       now_ms=now_ms(), expected=None)
    first: Path | None = None
    for node_id in nodes:
        home = root / node_id
        layout = HomeLayout(home)
        for folder in (layout.root, layout.run, layout.logs):
            folder.mkdir(parents=True, exist_ok=True)
        (home / "nereus.toml").write_text(spec.node_toml(node_id))
        if first is None:
            route_key(home, ROUTE)
            first = home
        else:
            key_path(home, ROUTE).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copy2(key_path(first, ROUTE), key_path(home, ROUTE))
    cluster = Cluster(spec, root, owned, store)
    try:
        yield cluster
    finally:
        store.handle.close()


# steady load ----------------------------------------------------------------------------
@dataclass
class Load:
    """Schedules queued straight to the Command Topic by a thread of its own, ``rate`` per
    second in small batches, each due 0..``spread_ms`` after it is queued. ``deliver``
    holds what the log acknowledged (message id -> deliverAt)."""

    spec: ClusterSpec
    logs: ShardLogs
    rate: int = 200
    spread_ms: int = 3_000
    deliver: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _body(self) -> None:
        rng = random.Random(self.spec.run)
        n = 0
        step_s = 0.05
        per_step = max(1, int(self.rate * step_s))
        while not self._stop.is_set():
            at = now_ms()
            batch = {f"m{n + i:07d}": at + rng.randrange(self.spread_ms + 1)
                     for i in range(per_step)}
            n += per_step
            prepared = [prepare_schedule(self.spec.route, command_id=f"s-{m}",
                                         delay_message_id=m, lane=LANE, deliver_at_ms=due,
                                         key=m, payload=m.encode())
                        for m, due in batch.items()]
            try:
                queue(prepared, self.logs)
            except Exception as exc:  # not acknowledged: not counted (a broker hiccup)
                self.errors.append(f"{type(exc).__name__}: {exc}")
            else:
                self.deliver.update(batch)
            self._stop.wait(max(0.0, step_s - (now_ms() - at) / 1000))

    def acknowledged(self, more: int, deadline_s: float = 60.0) -> None:
        """Wait until ``more`` further schedules are acknowledged by the log (the load has
        run that far), not for a length of time."""
        goal = len(self.deliver) + more
        wait_until(f"{more} more schedules acknowledged", lambda: len(self.deliver) >= goal,
                   deadline_s, interval_s=0.05, seen=lambda: (len(self.deliver), self.errors[-1:]))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._body, name="cluster-load", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            assert not self._thread.is_alive(), "the load thread did not stop"

    @property
    def last_due_ms(self) -> int:
        return max(self.deliver.values(), default=0)


def monotonic_s() -> float:
    return time.monotonic()
