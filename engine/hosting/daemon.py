"""The engine daemon process: home lock, logs, signals, the engine and its admin socket.

``nereus engine start`` runs ``python -m nereus.engine.hosting.daemon --home H`` in a new session
(detached; ``--foreground`` runs the same code attached). The home directory itself is
held with an exclusive ``flock`` for the daemon's whole life, so two daemons can never own
one home, whatever happens to the files in it; ``<home>/run/engine.pid`` says which pid
holds it, and the daemon removes that file (and its socket) on exit only if it is still
the one it made.

SIGTERM / SIGINT or ``POST /v1/shutdown`` stop it gracefully: the admin socket closes
first and lets requests in progress finish, then ``Engine.stop`` runs. SIGHUP (what a
logrotate ``postrotate`` sends) reopens ``<home>/log/engine.log`` if it was moved; it no
longer kills the daemon. SIGQUIT writes every thread's stack to ``<home>/log/engine.out``
and the daemon runs on (``nereus.engine.hosting.process_requests``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nereus.adapters.home.home_lock import (
    AlreadyRunning,
    acquire_home_lock,
    is_locked,
    lock_holder,
    pid_file,
    read_pid,
    remove_if_ours,
    socket_path,
    write_pid_file,
)
from nereus.engine.hosting.process_requests import (
    ProcessRequests,
    event_logger,
    signal_requests,
)
from nereus.errors import NereusError
from nereus.layout import HomeLayout

if TYPE_CHECKING:
    from nereus.adapters.cluster.coordinator_url import ClusterHandle
    from nereus.config import Config
    from nereus.engine.admin.endpoints import AdminEndpoints
    from nereus.engine.hosting.admin_server import AdminServer
    from nereus.engine.hosting.cluster.cluster_node import ClusterNode
    from nereus.engine.hosting.cluster.node_settings import ConfigSource
    from nereus.engine.metrics.listener import MetricsListener
    from nereus.engine.process.home_engine import Engine
    from nereus.engine.runtime.event_log import EventLog
    from nereus.engine.runtime.log_files import EngineLogs

__all__ = ["AlreadyRunning", "is_locked", "lock_holder", "main", "pid_file", "read_pid",
           "run", "socket_path"]


def run(home: Path, *, foreground: bool) -> int:
    """Run the engine of ``home`` (a node's, on a cluster) until asked to stop; the exit
    status."""
    from nereus.adapters.cluster.home_config import load_home_config
    from nereus.adapters.home.feature_level import refuse_below_home_level
    from nereus.adapters.home.private_files import enter_private_mode, secure_home
    from nereus.engine.hosting.admin_server import AdminServer
    from nereus.engine.metrics.listener import open_listener
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.process.home_engine import Engine
    from nereus.engine.runtime import log_files as logs

    enter_private_mode()
    secure_home(home)
    layout = HomeLayout(home)
    config = load_home_config(layout.config)
    settings = EngineSettings.from_config(config.engine)
    lock_fd = acquire_home_lock(home)
    pid_stat = write_pid_file(home)
    engine_logs = logs.configure(layout.logs, foreground=foreground,
                                 level=config.engine.log_level)
    logger = engine_logs.logger

    log_event = event_logger(logger)
    requests = signal_requests()  # the handlers only ask; the main thread acts
    handle = _cluster_handle(config)
    engine = Engine(home, config, settings=settings, log_event=log_event, catalog=handle)
    server = listener = None
    node = None
    try:
        if handle is not None:
            node = join_when_free(engine, handle, log_event)
            engine.start(owned=())
            node.start(engine.supervisor)
        else:
            refuse_below_home_level(home)  # a downgrade below what the home has written
            engine.start()
        api = _endpoints(engine, node)
        server = AdminServer(api, socket_path(home), on_shutdown=lambda: requests.put("stop"))
        server.start(engine.supervisor)
        listener = open_listener(config.metrics.address, lambda: api.metrics().exposition,
                                 engine.supervisor)
        log_event("admin_socket_ready", path=str(socket_path(home)), pid=os.getpid(),
                  metrics=config.metrics.listen)
        _until_stopped(requests, engine_logs, log_event)
        _stop(engine, node, server, listener, log_event)
        return 0
    except Exception as exc:
        logger.error("engine_failed", error=f"{type(exc).__name__}: {exc}")
        abandon(engine, node)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if listener is not None:
            listener.close()
        if server is not None:
            server.close()
        remove_if_ours(pid_file(home), pid_stat, content=f"{os.getpid()}\n".encode())
        os.close(lock_fd)
        engine_logs.close()


def _until_stopped(requests: ProcessRequests, engine_logs: EngineLogs,
                   log_event: EventLog) -> None:
    """Until a stop is asked; a SIGHUP meanwhile reopens the log if it was moved."""
    while requests.next() == "reopen_logs":
        reopened = engine_logs.reopen()
        log_event("log_reopened" if reopened else "log_not_moved",
                  path=str(engine_logs.path), reason="SIGHUP")


def _endpoints(engine: Engine, node: ClusterNode | None) -> AdminEndpoints:
    """What the admin socket answers: the single engine's ``AdminApi``, a node's
    ``NodeApi``."""
    from nereus.engine.admin.api import AdminApi
    from nereus.engine.hosting.cluster.node_api import NodeApi

    if node is None:
        return AdminApi(engine)
    return NodeApi(engine, node.store, host=node.settings.host)


def _stop(engine: Engine, node: ClusterNode | None, server: AdminServer,
          listener: MetricsListener | None, log_event: EventLog) -> None:
    """Stop in order. The admin socket goes first and waits for requests in progress: none
    may read a shard store while engine.stop() closes it."""
    log_event("engine_stopping")
    if listener is not None:
        listener.close()
    if not server.close():
        log_event("admin_requests_still_running")
    if node is not None:
        node.stop_reconciling()
    report = engine.stop()
    if node is not None:
        node.leave()
    log_event("engine_exit", **report)


def _cluster_handle(config: Config) -> ClusterHandle | None:
    """The coordinator of the cluster this home is a node of (None: a standalone home)."""
    if config.cluster is None:
        return None
    from nereus.adapters.cluster.coordinator_url import open_cluster
    from nereus.adapters.time_source import SYSTEM_CLOCK

    return open_cluster(config.cluster.coordinator, clock=SYSTEM_CLOCK)


def abandon(engine: Engine, node: ClusterNode | None) -> None:
    """After a failure: stop what runs, as far as it goes (the error is reported anyway)."""
    if node is not None:
        node.stop_reconciling()
    with contextlib.suppress(Exception):
        engine.stop()
    if node is not None:
        with contextlib.suppress(Exception):
            node.leave()


def join_cluster(engine: Engine, handle: ClusterHandle, log_event: EventLog, *,
                 address: Path | None = None, reload: ConfigSource | None = None) -> ClusterNode:
    """This engine as a node of the cluster its ``[cluster]`` names: joined (a session and
    its member record; ``NodeIdInUse`` when the id is taken, ``NodeIdInUseElsewhere`` at once
    when another home runs under it or as its workers), not yet reconciling.
    ``address``: its admin socket (the home's, unless a worker process serves its own)."""
    import socket as sockets

    from nereus import __version__
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.evidence_seal import seal_key_of
    from nereus.adapters.cluster.home_config import load_home_config
    from nereus.adapters.cluster.route_keys import install_route_keys, share_route_keys
    from nereus.adapters.home.feature_level import build_level
    from nereus.engine.hosting.cluster.cluster_node import ClusterNode
    from nereus.engine.hosting.cluster.node_settings import NodeSettings
    from nereus.engine.hosting.workers.home import refuse_namesakes

    cluster = engine.config.cluster
    assert cluster is not None and engine.time_source is not None
    store = ClusterStore(handle)
    host = cluster.host or sockets.gethostname()
    # another home under this id (or as its workers) is refused before anything is written
    refuse_namesakes(store.members(), cluster.node_id, home=engine.home, host=host)
    # every node signs and checks evidence with the route's one key, kept in the cluster
    # (sealed from feature level 2: a node without the sealing key is refused here)
    seal_key = seal_key_of(cluster, engine.home)
    # a key this home holds already (a node set up by hand, or before its cluster held
    # one) is the one shared, rather than a new one its own home would then refuse
    share_route_keys(store, engine.config.routes, now_ms=engine.time_source.wall_ms(),
                     made_by=f"node {cluster.node_id}", keys_from=engine.home,
                     seal_key=seal_key)
    installed = install_route_keys(store, engine.home, engine.config.routes, seal_key=seal_key)
    if installed:
        log_event("route_keys_installed", routes=installed)
    node = ClusterNode(engine, store, NodeSettings(
        node_id=cluster.node_id, host=host,
        address=str(address or socket_path(engine.home)), capacity=cluster.capacity,
        session_ttl_ms=cluster.session_ttl_ms, lease_margin_ms=cluster.lease_margin_ms,
        version=__version__, feature_level=build_level(), seal_key=seal_key,
        standby=cluster.standby),
        clock=engine.time_source,
        events=log_event,
        reload=reload or (lambda: load_home_config(engine.layout.config)))
    node.join()
    return node


def join_when_free(engine: Engine, handle: ClusterHandle, log_event: EventLog, *,
                   address: Path | None = None,
                   reload: ConfigSource | None = None) -> ClusterNode:
    """``join_cluster``, tried again while this home's previous run (SIGKILLed: its
    process gone, its session not yet) holds the node id, until that session's TTL has
    run out twice over; the wait is logged once with the holder. Another home's node under
    the id (``NodeIdInUseElsewhere``) is not waited for."""
    import time

    from nereus.cluster.errors import NodeIdInUse, NodeIdInUseElsewhere

    cluster = engine.config.cluster
    assert cluster is not None
    deadline = time.monotonic() + 2 * cluster.session_ttl_ms / 1000 + 1
    said = False
    while True:
        try:
            return join_cluster(engine, handle, log_event, address=address, reload=reload)
        except NodeIdInUseElsewhere:
            raise
        except NodeIdInUse as exc:
            if time.monotonic() > deadline:
                raise
            if not said:
                log_event("node_id_held_by_previous_run", node_id=cluster.node_id,
                          detail=exc.message, session_ttl_ms=cluster.session_ttl_ms)
                said = True
            time.sleep(0.2)


def main() -> None:
    from nereus.adapters.home.malloc_settings import settle_malloc

    settle_malloc()  # before any thread (nereus.adapters.home.malloc_settings)
    parser = argparse.ArgumentParser(prog="nereus-engine")
    parser.add_argument("--home", required=True)
    parser.add_argument("--foreground", action="store_true")
    # --workers N (N >= 2): the front door of N worker processes (nereus.engine.hosting.workers);
    # --worker K: one of them (started by the front door, never by hand)
    parser.add_argument("--workers", type=int, default=None)  # None: workers.count
    parser.add_argument("--worker", type=int, default=None)
    args = parser.parse_args()
    try:
        sys.exit(run_daemon(Path(args.home), foreground=args.foreground, workers=args.workers,
                      worker=args.worker))
    except NereusError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(int(exc.exit_code))


def run_daemon(home: Path, *, foreground: bool, workers: int | None,
               worker: int | None) -> int:
    """The daemon, the front door of ``workers`` processes (None: the default count,
    ``nereus.engine.hosting.workers.count``), or worker ``worker``."""
    if worker is not None:
        from nereus.engine.hosting.workers.worker import run_worker

        return run_worker(home, worker, expected=workers or 1, foreground=foreground)
    if workers is None:
        from nereus.adapters.cluster.home_config import load_home_config
        from nereus.engine.hosting.workers.count import worker_count

        workers = worker_count(load_home_config(HomeLayout(home).config), None)
    if workers > 1:
        from nereus.engine.hosting.workers.front_door import run_front_door

        return run_front_door(home, workers, foreground=foreground)
    return run(home, foreground=foreground)


if __name__ == "__main__":
    main()
