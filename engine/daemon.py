"""The engine daemon process: pid lock, logs, signals, the engine and its admin socket.

``nereus engine start`` runs ``python -m nereus.engine.daemon --home H`` in a new session
(detached; ``--foreground`` runs the same code attached). ``<home>/run/engine.pid`` is
held with an exclusive ``flock`` for the daemon's whole life, so two daemons can never own
one home, and a stale file from a crashed daemon is simply re-locked.

SIGTERM / SIGINT or ``POST /v1/shutdown`` stop it gracefully: the admin socket closes
first and lets requests in progress finish, then ``Engine.stop`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import sys
import threading
from pathlib import Path

from nereus.errors import NereusError
from nereus.layout import HomeLayout


class AlreadyRunning(NereusError):
    """Another daemon holds this home's pid lock."""


def pid_file(home: Path) -> Path:
    return HomeLayout(home).run / "engine.pid"


def socket_path(home: Path) -> Path:
    return HomeLayout(home).run / "admin.sock"


def acquire_pid_lock(home: Path) -> int:
    path = pid_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise AlreadyRunning(
            f"an engine already runs on {home} (pid {read_pid(home) or '?'})",
            hint="stop it with `nereus engine stop`, or use another --home",
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    os.fsync(fd)
    return fd


def read_pid(home: Path) -> int | None:
    try:
        text = pid_file(home).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def is_locked(home: Path) -> bool:
    """True while a live daemon holds the pid lock."""
    path = pid_file(home)
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def run(home: Path, *, foreground: bool) -> int:
    from nereus.config import parse_config
    from nereus.engine import logs
    from nereus.engine.admin.api import AdminApi
    from nereus.engine.admin.server import AdminServer
    from nereus.engine.engine import Engine, EngineSettings

    layout = HomeLayout(home)
    config = parse_config(layout.config.read_text(), source=str(layout.config))
    settings = EngineSettings.from_config(config.engine)
    lock_fd = acquire_pid_lock(home)
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
        with contextlib.suppress(OSError):
            pid_file(home).unlink()
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
