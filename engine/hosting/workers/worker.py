"""One worker process of ``engine start --workers N`` (``--worker K``).

A cluster member like any node (a session, its member record, the reconciling worker) on
the home's embedded coordinator, or ``<node_id>-w<K>`` of a node's cluster, serving
``<home>/run/workers/<K>.sock`` with the single engine's ``AdminApi`` (a node's
``NodeApi``). It holds no lock and writes no pid file: the front door, its parent, does. It
waits a few seconds for the other workers before taking shards, so a fresh start places
each shard once. It stops on SIGTERM, ``POST /v1/shutdown`` or its parent's death (an
orphan must not keep shards): socket first, shards drained, session ended.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from nereus.engine.hosting.process_requests import ProcessRequests, event_logger, signal_requests
from nereus.engine.hosting.workers.home import (
    node_id,
    worker_config,
    worker_log,
    worker_socket,
)
from nereus.layout import HomeLayout

if TYPE_CHECKING:
    from nereus.adapters.cluster.coordinator_url import ClusterHandle
    from nereus.config import Config
    from nereus.engine.admin.endpoints import AdminEndpoints
    from nereus.engine.hosting.admin_server import AdminServer
    from nereus.engine.hosting.cluster.cluster_node import ClusterNode
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.process.home_engine import Engine
    from nereus.engine.runtime.event_log import EventLog

MEMBERS_WAIT_S: Final = 10.0



def run_worker(home: Path, index: int, *, expected: int, foreground: bool) -> int:
    """Run worker ``index`` of ``expected`` until asked to stop; its exit status."""
    from nereus.adapters.cluster.coordinator_url import open_cluster
    from nereus.adapters.cluster.home_config import load_home_config
    from nereus.adapters.home.private_files import enter_private_mode
    from nereus.engine.hosting.daemon import abandon
    from nereus.engine.process.home_engine import Engine
    from nereus.engine.runtime import log_files as logs

    enter_private_mode()
    layout = HomeLayout(home)
    home_config = load_home_config(layout.config)
    config = worker_config(home_config, home, index)
    clustered = home_config.cluster is not None
    engine_logs = logs.configure(layout.logs, foreground=foreground, name=worker_log(index),
                                 level=home_config.engine.log_level)
    logger = engine_logs.logger

    # "process", not "worker": the supervisor's events name their worker thread "worker"
    log_event = event_logger(logger, process=index)

    requests = signal_requests()
    assert config.cluster is not None
    # standalone, the catalog stays in the home's object store: every worker shares it, and
    # a home run with one process or several sees the same Recovery Set; on a node of a
    # cluster it is the cluster's, in the coordinator
    handle = open_cluster(config.cluster.coordinator)
    engine = Engine(home, config, settings=_settings(config, expected), log_event=log_event,
                    catalog=handle if clustered else None)
    parent = _ParentWatch(requests)
    engine.supervisor.spawn("parent-watch", "worker", parent.run)
    node: ClusterNode | None = None
    server = None
    try:
        node = _join(engine, handle, log_event, worker_socket(home, index), index)
        engine.start(owned=())
        _await_members(node, {node_id(home_config, k) for k in range(expected)})
        node.start(engine.supervisor)
        server = _admin_server(engine, node, worker_socket(home, index), requests,
                               clustered=clustered)
        server.start(engine.supervisor)
        log_event("worker_ready", path=str(worker_socket(home, index)), pid=os.getpid())
        while requests.next() == "reopen_logs":
            engine_logs.reopen()
        _stop(engine, node, server, log_event)
        return 0
    except Exception as exc:
        logger.error("worker_failed", worker=index, error=f"{type(exc).__name__}: {exc}")
        abandon(engine, node)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        parent.stop()
        if server is not None:
            server.close()
        engine_logs.close()


def _settings(config: Config, expected: int) -> EngineSettings:
    """The home's engine settings, its memory budget shared among ``expected`` workers."""
    from nereus.engine.hosting.workers.count import worker_memory_mb, worker_shards
    from nereus.engine.process.engine_settings import EngineSettings

    settings = EngineSettings.from_config(config.engine)
    return dataclasses.replace(settings,
                               memory_mb=worker_memory_mb(settings.memory_mb, expected),
                               memory_shards=worker_shards(config, expected))


def _admin_server(engine: Engine, node: ClusterNode, address: Path,
                  requests: ProcessRequests, *, clustered: bool) -> AdminServer:
    """The worker's admin server (not started): a node's ``NodeApi`` on a cluster, else the
    single engine's ``AdminApi`` that knows the other workers' shards."""
    from nereus.engine.admin.api import AdminApi
    from nereus.engine.hosting.admin_server import AdminServer
    from nereus.engine.hosting.cluster.node_api import NodeApi
    from nereus.engine.hosting.cluster.node_lookup import StoreOwnerLookup

    api: AdminEndpoints = NodeApi(engine, node.store, host=node.settings.host) \
        if clustered else AdminApi(engine, owners=StoreOwnerLookup(node.store))
    return AdminServer(api, address, on_shutdown=lambda: requests.put("stop"))


def _stop(engine: Engine, node: ClusterNode, server: AdminServer, log_event: EventLog) -> None:
    """Stop in order: the socket, reconciling, the shards (drained), the session."""
    log_event("worker_stopping")
    if not server.close():
        log_event("admin_requests_still_running")
    node.stop_reconciling()
    report = engine.stop()
    node.leave()
    log_event("worker_exit", **report)


def _join(engine: Engine, handle: ClusterHandle, log_event: EventLog, address: Path,
          index: int) -> ClusterNode:
    """Join as this worker's node (``join_when_free``: a previous incarnation's session,
    SIGKILLed, is waited out)."""
    from nereus.adapters.cluster.home_config import load_home_config
    from nereus.engine.hosting.daemon import join_when_free

    return join_when_free(engine, handle, log_event, address=address,
                          reload=lambda: worker_config(
                              load_home_config(engine.layout.config), engine.home, index))


def _await_members(node: ClusterNode, expected: set[str]) -> None:
    """Wait (``MEMBERS_WAIT_S`` at most) until every worker in ``expected`` is a member."""
    deadline = time.monotonic() + MEMBERS_WAIT_S
    while not expected <= set(node.store.members()) and time.monotonic() < deadline:
        time.sleep(0.05)


class _ParentWatch:
    """Asks the worker to stop once its parent (the front door) is gone."""

    def __init__(self, requests: ProcessRequests) -> None:
        self._parent = os.getppid()
        self._requests = requests
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(0.5):
            if os.getppid() != self._parent:
                self._requests.put("stop")
                return

    def stop(self) -> None:
        self._stop.set()
