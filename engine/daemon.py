"""The engine daemon process: home lock, logs, signals, the engine and its admin socket.

``nereus engine start`` runs ``python -m nereus.engine.daemon --home H`` in a new session
(detached; ``--foreground`` runs the same code attached). The home directory itself is
held with an exclusive ``flock`` for the daemon's whole life, so two daemons can never own
one home, whatever happens to the files in it; ``<home>/run/engine.pid`` says which pid
holds it, and the daemon removes that file (and its socket) on exit only if it is still
the one it made.

SIGTERM / SIGINT or ``POST /v1/shutdown`` stop it gracefully: the admin socket closes
first and lets requests in progress finish, then ``Engine.stop`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from nereus.adapters.home_lock import (
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
from nereus.errors import NereusError
from nereus.layout import HomeLayout

__all__ = ["AlreadyRunning", "is_locked", "lock_holder", "main", "pid_file", "read_pid",
           "run", "socket_path"]


def run(home: Path, *, foreground: bool) -> int:
    from nereus.adapters.private_files import enter_private_mode, secure_home
    from nereus.config import parse_config
    from nereus.engine import logs
    from nereus.engine.admin.api import AdminApi
    from nereus.engine.admin.server import AdminServer
    from nereus.engine.engine import Engine, EngineSettings

    enter_private_mode()
    secure_home(home)
    layout = HomeLayout(home)
    config = parse_config(layout.config.read_text(), source=str(layout.config))
    settings = EngineSettings.from_config(config.engine)
    lock_fd = acquire_home_lock(home)
    pid_stat = write_pid_file(home)
    logger = logs.configure(layout.logs, foreground=foreground)

    def log_event(event: str, /, **fields: object) -> None:
        level = fields.pop("level", "info")
        method = getattr(logger, str(level), None) or logger.info
        method(event, **fields)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    engine = Engine(home, config, settings=settings, log_event=log_event)
    server = None
    try:
        engine.start()
        server = AdminServer(AdminApi(engine), socket_path(home), on_shutdown=stop.set)
        server.start(engine.supervisor)
        log_event("admin_socket_ready", path=str(socket_path(home)), pid=os.getpid())
        stop.wait()
        log_event("engine_stopping")
        # The admin socket goes first and waits for requests in progress: none may read
        # a shard store while engine.stop() closes it.
        if not server.close():
            log_event("admin_requests_still_running")
        report = engine.stop()
        log_event("engine_exit", **report)
        return 0
    except Exception as exc:
        logger.error("engine_failed", error=f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            engine.stop()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.close()
        remove_if_ours(pid_file(home), pid_stat, content=f"{os.getpid()}\n".encode())
        os.close(lock_fd)


def main() -> None:
    parser = argparse.ArgumentParser(prog="nereus-engine")
    parser.add_argument("--home", required=True)
    parser.add_argument("--foreground", action="store_true")
    args = parser.parse_args()
    try:
        sys.exit(run(Path(args.home), foreground=args.foreground))
    except NereusError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(int(exc.exit_code))


if __name__ == "__main__":
    main()
