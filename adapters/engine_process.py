"""Starting and stopping a home's engine daemon from outside it, as ``engine start`` /
``engine stop`` (and ``quickstart``) do, and what each reports (``--json``).

Starting spawns ``python -m nereus.engine.daemon --home HOME`` in a new session and waits
until the admin socket answers *for that process* (another engine's socket is no answer:
the new one then exits, the home being locked). Stopping asks over the admin socket
(SIGTERM when it does not answer) and waits until the home's lock is free: the lock, not
the pid file, says whether an engine runs (``nereus.adapters.home_lock``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import msgspec

from nereus.adapters.admin_client import AdminClient
from nereus.adapters.home_lock import AlreadyRunning, is_locked, lock_holder, socket_path
from nereus.errors import NereusError
from nereus.layout import HomeLayout


class EngineStarted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``engine start``: the daemon answers on its socket."""

    running: bool  # always true
    pid: int
    socket: str
    log: str
    shards: list[str]


class EngineStopped(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``engine stop``: ``stopped`` false when no engine was running (then no ``pid``)."""

    running: bool  # always false
    stopped: bool
    pid: int | msgspec.UnsetType | None = msgspec.UNSET  # None: the lock's holder is unknown


def start_engine(layout: HomeLayout, timeout: float, warn: Callable[[str], None], *,
                 workers: int | None = None) -> EngineStarted:
    """Start the daemon detached and wait until its admin socket answers; ``warn`` is told
    of each shard that came up FAILED. ``workers``: that many worker processes behind a
    front door when above 1 (``nereus.engine.workers``); None: the daemon's default
    (``nereus.engine.workers.count``)."""
    home = layout.root.resolve()
    if is_locked(home):  # the home directory's lock, not the pid file (which may be gone)
        raise AlreadyRunning(f"an engine already runs on {home} (pid {lock_holder(home) or '?'})",
                             hint="stop it with `nereus engine stop`")
    layout.logs.mkdir(parents=True, exist_ok=True)
    out_path = layout.logs / "engine.out"
    with open(out_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "nereus.engine.daemon", "--home", str(home),
             *(["--workers", str(workers)] if workers is not None else [])],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            close_fds=True,
        )
    client = AdminClient(socket_path(home), timeout=5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = out_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise NereusError(f"the engine exited with status {code} while starting",
                              hint=" | ".join(tail) or f"see {out_path}")
        if socket_path(home).exists():
            try:
                status = client.get("/v1/status")
            except NereusError:
                pass
            else:
                # another engine's socket is not an answer: ours then exits (home locked)
                if status["owner_id"].split(":")[1] == str(proc.pid):
                    for shard in status["shards"]:
                        if shard["state"] == "FAILED":
                            warn(f"shard {shard['shard']} is FAILED: {shard['error']}")
                    return EngineStarted(running=True, pid=proc.pid,
                                         socket=str(socket_path(home)),
                                         log=str(layout.logs / "engine.log"),
                                         shards=[s["shard"] for s in status["shards"]])
        time.sleep(0.05)
    raise NereusError(f"the engine did not answer within {timeout:.0f} s",
                      hint=f"see {layout.logs / 'engine.log'}")


def stop_engine(layout: HomeLayout, timeout: float) -> EngineStopped:
    """Ask the daemon to stop (SIGTERM if the socket is gone) and wait for it to exit."""
    import os
    import signal

    home = layout.root.resolve()
    pid = lock_holder(home)  # the lock's holder, whatever became of the pid file
    if not is_locked(home):
        return EngineStopped(running=False, stopped=False)
    try:
        from nereus.adapters.admin_wire import Empty, Stopping

        AdminClient(socket_path(home), timeout=5).post("/v1/shutdown", Empty(), Stopping)
    except NereusError:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while is_locked(home):
        if time.monotonic() > deadline:
            raise NereusError(f"the engine (pid {pid}) did not stop within {timeout:.0f} s",
                              hint=f"see {layout.logs / 'engine.log'}")
        time.sleep(0.05)
    return EngineStopped(running=False, stopped=True, pid=pid)
