"""The front door of ``engine start --workers N``: it takes the single daemon's place (the
home's lock, pid file and ``<home>/run/admin.sock``) while N worker processes, members of
the home's embedded cluster (``<home>/coordinator.db``, cluster ``workers``), own the shards.

Start: the shared tables of ``nereus.toml`` become the cluster's configuration (CAS on each
start), route keys are made once, the workers start under a ``Supervisor``, and the socket
opens once every shard is ACTIVE or held FAILED (or at the start timeout). A shard a worker
refused to open fails the start as a single engine's would: exit 1, ``error: <reason>``. On
a cluster node the workers are ``<node_id>-w<K>`` of that cluster; another home live under
the id, or a worker exiting during the start, fails it at once. Stop (SIGTERM, SIGINT,
``POST /v1/shutdown``): socket first, every worker drains, then the front door exits.
(``docs/decisions/0020-worker-processes.md``.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from nereus.adapters.home.home_lock import (
    acquire_home_lock,
    pid_file,
    remove_if_ours,
    socket_path,
    write_pid_file,
)
from nereus.engine.hosting.process_requests import ProcessRequests, event_logger, signal_requests
from nereus.errors import NereusError
from nereus.layout import HomeLayout

if TYPE_CHECKING:
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.config import Config
    from nereus.engine.hosting.admin_server import AdminServer
    from nereus.engine.hosting.workers.front_api import FrontApi
    from nereus.engine.hosting.workers.processes import WorkerProcess
    from nereus.engine.metrics.listener import MetricsListener
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.process.payload_collector import PayloadCollector
    from nereus.engine.runtime.event_log import EventLog
    from nereus.engine.runtime.supervisor import Supervisor

READY_TIMEOUT_S: Final = 120.0
STOP_GRACE_S: Final = 30.0  # beyond the engine's own stop timeout, before SIGKILL


def run_front_door(home: Path, count: int, *, foreground: bool) -> int:
    """Run the front door and its ``count`` workers until asked to stop; the exit status."""
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.coordinator_url import open_cluster
    from nereus.adapters.cluster.home_config import load_home_config
    from nereus.adapters.home.private_files import enter_private_mode, secure_home
    from nereus.adapters.time_source import SYSTEM_CLOCK
    from nereus.engine.hosting.workers.home import node_id, worker_coordinator
    from nereus.engine.hosting.workers.processes import WorkerProcess, stop_all
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.runtime import log_files as logs
    from nereus.engine.runtime.supervisor import Supervisor

    enter_private_mode()
    secure_home(home)
    layout = HomeLayout(home)
    config = load_home_config(layout.config)
    members = [node_id(config, index) for index in range(count)]  # refuses ids too long
    settings = EngineSettings.from_config(config.engine)
    lock_fd = acquire_home_lock(home)
    pid_stat = write_pid_file(home)
    engine_logs = logs.configure(layout.logs, foreground=foreground,
                                 level=config.engine.log_level)
    logger = engine_logs.logger

    log_event = event_logger(logger)
    requests = signal_requests()  # the handlers only ask; the main thread acts
    started_ms = SYSTEM_CLOCK.wall_ms()
    supervisor = Supervisor(log_event)
    store = ClusterStore(open_cluster(worker_coordinator(config, home)))
    processes = [WorkerProcess(home, index, count, log_event) for index in range(count)]
    parts = _Parts(processes, store, settings.stop_timeout_s + STOP_GRACE_S)
    try:
        _share_config(store, config, home)
        for worker in processes:
            worker.start(supervisor)
        server = parts.open(home, config, settings, members, supervisor, requests, log_event,
                            started_ms)
        log_event("admin_socket_ready", path=str(socket_path(home)), pid=os.getpid(),
                  workers=count, metrics=config.metrics.listen)
        while requests.next() == "reopen_logs":
            engine_logs.reopen()
        log_event("engine_stopping", workers=count)
        if parts.listener is not None:
            parts.listener.close()
        if not server.close():
            log_event("admin_requests_still_running")
        stop_all(processes, settings.stop_timeout_s + STOP_GRACE_S)
        log_event("engine_exit", workers=count)
        return 0
    except Exception as exc:
        logger.error("engine_failed", error=f"{type(exc).__name__}: {exc}")
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        parts.close()
        remove_if_ours(pid_file(home), pid_stat, content=f"{os.getpid()}\n".encode())
        os.close(lock_fd)
        engine_logs.close()


def _share_config(store: ClusterStore, config: Config, home: Path) -> None:
    """Standalone: the home's shared tables become the workers' cluster configuration and
    each route has its key. On a node (whose configuration and keys are the cluster's
    own already): another home running under this node's id is refused before any worker
    runs."""
    from nereus.adapters.home.route_secrets import route_key
    from nereus.engine.hosting.workers.home import refuse_namesakes

    if config.cluster is None:
        layout = HomeLayout(home)
        _write_config(store, layout.config.read_text(), source=str(layout.config))
        for route in config.routes:
            route_key(home, route)
    else:
        refuse_namesakes(store.members(), config.cluster.node_id, home=home,
                         host=config.cluster.host or socket.gethostname())


@dataclass
class _Parts:
    """What the front door opened after its workers, closed in order on the way out."""

    processes: list[WorkerProcess]
    store: ClusterStore
    stop_s: float
    api: FrontApi | None = None
    server: AdminServer | None = None
    listener: MetricsListener | None = None
    collector: PayloadCollector | None = None

    def open(self, home: Path, config: Config, settings: EngineSettings, members: list[str],
             supervisor: Supervisor, requests: ProcessRequests, log_event: EventLog,
             started_ms: int) -> AdminServer:
        """The front door's API once the workers are ready (or the start timed out), its
        admin socket, the metrics listener and, standalone, the payload collection."""
        from nereus.adapters.backends.objectstore.factory import open_object_store
        from nereus.engine.hosting.admin_server import AdminServer
        from nereus.engine.hosting.workers.front_api import FrontApi
        from nereus.engine.metrics.listener import open_listener
        from nereus.engine.process.payload_collector import PayloadCollector
        from nereus.engine.runtime.trusted_clock import TrustedClock

        api = self.api = FrontApi(
            home, config, self.store, members, supervisor,
            owner_id=f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
            started_ms=started_ms, clock=TrustedClock(max_error_ms=settings.max_clock_error_ms))
        if not _await_ready(self.store, api, requests, self.processes):
            log_event("workers_not_ready", level="warning", timeout_s=READY_TIMEOUT_S)
        server = self.server = AdminServer(api, socket_path(home),
                                           on_shutdown=lambda: requests.put("stop"))
        server.start(supervisor)
        self.listener = open_listener(config.metrics.address, lambda: api.metrics().exposition,
                                      supervisor)
        if config.cluster is None:  # the front door sees every shard of the home; a node not
            self.collector = PayloadCollector(
                config, HomeLayout(home), open_object_store(config.objects, home),
                interval_s=settings.payload_gc_interval_s, events=log_event)
            if self.collector.start(supervisor):
                api.payloads = self.collector
        return server

    def close(self) -> None:
        from nereus.engine.hosting.workers.processes import stop_all

        if self.collector is not None:
            self.collector.stop()
        if self.listener is not None:
            self.listener.close()
        if self.server is not None:
            self.server.close()
        stop_all(self.processes, self.stop_s)
        if self.api is not None:
            self.api.close()
        with contextlib.suppress(Exception):
            self.store.handle.close()


def _write_config(store: ClusterStore, text: str, *, source: str) -> None:
    """The home's shared tables as the cluster's configuration (CAS on what was read)."""
    from nereus.adapters.time_source import SYSTEM_CLOCK
    from nereus.coordination.errors import UnexpectedVersionId
    from nereus.engine.hosting.workers.home import shared_text

    shared = shared_text(text, source=source)
    for _ in range(5):
        current = store.config()
        if current is not None and current[0].toml == shared:
            return
        try:
            store.write_config(shared, changed_by=f"front door pid {os.getpid()}",
                               reason="engine start --workers", now_ms=SYSTEM_CLOCK.wall_ms(),
                               expected=None if current is None else current[1],
                               summary=f"from {source}")
            return
        except UnexpectedVersionId:
            continue
    raise RuntimeError("the cluster's configuration kept changing while it was written")


def _await_ready(store: ClusterStore, api: FrontApi, requests: ProcessRequests,
                 processes: list[WorkerProcess]) -> bool:
    """Wait until the workers hold their shards (``_ready``), a stop request comes, or the
    start timeout runs out; whether they did. A worker that exits meanwhile fails the
    start with its reason (``StartRefused``), as a single engine's start fails."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        for worker in processes:
            if worker.exits:
                raise StartRefused(worker.last_exit or f"worker {worker.index} exited",
                                   hint=f"see {HomeLayout(api.home).logs}/"
                                   f"worker-{worker.index}.log")
        if _ready(store, api, {api.members[w.index]: w.pid for w in processes}):
            return True
        if requests.get(0.1) == "stop":
            requests.put("stop")
            return False
    return False


def _ready(store: ClusterStore, api: FrontApi, pids: dict[str, int | None]) -> bool:
    """Standalone: every configured shard ACTIVE (or held FAILED) on some worker. On a
    node of a cluster: every worker a member (this front door's process: ``pids``, by
    node id), and every shard placed on one of them ACTIVE (or held FAILED) there. A shard
    whose opening a worker refused raises ``StartRefused``."""
    from nereus.cluster.records import OwnerState

    settled = (OwnerState.ACTIVE, OwnerState.FAILED)
    owners = store.owners()
    if not api.clustered:
        records = [None if (o := owners.get(s)) is None else o.record for s in api.configured()]
    else:
        ours = set(api.members)
        members = store.members()
        if not all(node in members and members[node].pid == pids.get(node) for node in ours):
            return False
        records = [None if (o := owners.get(shard)) is None or o.record.node_id != placed.node_id
                   else o.record for shard, (placed, _) in sorted(store.placements().items())
                   if placed.node_id in ours]
    if not all(record is not None and record.state in settled for record in records):
        return False
    for record in records:  # once all are settled: the first in shard order, as one engine
        if record is not None and record.state == OwnerState.FAILED and record.refused:
            raise StartRefused(record.detail or f"shard {record.shard} could not be opened",
                               hint=f"{record.node_id} refused shard {record.shard}")
    return True


class StartRefused(NereusError):
    """A worker could not open one of the shards: the start fails as a single engine's."""
