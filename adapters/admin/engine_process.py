"""Starting and stopping a home's engine daemon from outside it, as ``engine start`` /
``engine stop`` (and ``quickstart``) do, and what each reports (``--json``).

Starting spawns ``python -m nereus.engine.hosting.daemon --home HOME`` in a new session and waits
until the admin socket answers *for that process* (another engine's socket is no answer:
the new one then exits, the home being locked). A start that gives up at its timeout stops
the daemon it spawned (SIGTERM, SIGKILL after ``GIVE_UP_GRACE_S``) and says the last error
the engine logged: a failed start leaves nothing running. Stopping asks over the admin socket
(SIGTERM when it does not answer) and waits until the home's lock is free: the lock, not
the pid file, says whether an engine runs (``nereus.adapters.home.home_lock``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from nereus.adapters.admin.admin_client import AdminClient
from nereus.adapters.home.home_lock import (
    AlreadyRunning,
    is_locked,
    lock_holder,
    pid_file,
    socket_path,
)
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
    front door when above 1 (``nereus.engine.hosting.workers``); None: the daemon's default
    (``nereus.engine.hosting.workers.count``)."""
    home = layout.root.resolve()
    if is_locked(home):  # the home directory's lock, not the pid file (which may be gone)
        gone = [] if socket_path(home).exists() else ["its admin socket is gone"]
        gone += [] if pid_file(home).exists() else ["its pid file is gone"]
        raise AlreadyRunning(f"an engine already runs on {home} (pid {lock_holder(home) or '?'})"
                             + (f"; {' and '.join(gone)} (deleted under it)" if gone else ""),
                             hint="stop it with `nereus engine stop` (it finds the engine by "
                                  "the home's lock, whatever became of its files), then start "
                                  "it again")
    layout.logs.mkdir(parents=True, exist_ok=True)
    logged = log_sizes(layout)  # what this start logs comes after these
    out_path = layout.logs / "engine.out"
    with open(out_path, "ab") as out:
        said = out.tell()  # what this daemon says on stderr comes after this
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "nereus.engine.hosting.daemon", "--home", str(home),
             *(["--workers", str(workers)] if workers is not None else [])],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            close_fds=True,
        )
    client = AdminClient(socket_path(home), timeout=5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            with open(out_path, "rb") as out_file:  # this daemon's words, not older runs'
                out_file.seek(said)
                tail = out_file.read().decode(errors="replace").strip().splitlines()[-5:]
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
    stopped = _give_up(proc, home)
    why = last_error(layout, since=logged)
    raise NereusError(f"the engine did not answer within {timeout:g} s; "
                      + ("it was stopped" if stopped else f"pid {proc.pid} did not stop"),
                      hint=(f"its last error: {why}; " if why else "")
                      + f"see {layout.logs / 'engine.log'}")


GIVE_UP_GRACE_S = 20.0  # a daemon that gave no answer gets this long to stop on SIGTERM


def _give_up(proc: subprocess.Popen[bytes], home: Path) -> bool:
    """Stop a daemon that did not answer in time: SIGTERM, SIGKILL after the grace (its
    worker processes, if any, end with their parent); whether it and the home's lock are
    gone."""
    proc.terminate()
    try:
        proc.wait(GIVE_UP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + GIVE_UP_GRACE_S
    while is_locked(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not is_locked(home)


def log_sizes(layout: HomeLayout) -> dict[Path, int]:
    """The size of each engine log of the home now (``last_error`` reads what follows)."""
    sizes = {}
    for path in layout.logs.glob("*.log"):
        try:
            sizes[path] = path.stat().st_size
        except OSError:
            continue
    return sizes


def last_error(layout: HomeLayout, *, since: dict[Path, int],
               tail_bytes: int = 256 << 10) -> str | None:
    """The last event logged at error in the home's engine logs (``engine.log``, each
    worker's) after ``since`` (``log_sizes``), as ``event: reason``; None when none was."""
    import json

    found: tuple[str, str] | None = None
    for path in sorted(layout.logs.glob("*.log")):
        try:
            with open(path, "rb") as handle:
                end = handle.seek(0, 2)
                start = since.get(path, 0)
                handle.seek(start if start <= end else 0)  # shorter: rotated meanwhile
                handle.seek(max(handle.tell(), end - tail_bytes))
                lines = handle.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("level") == "error":
                why = event.get("reason") or event.get("error") or ""
                text = f"{event.get('event')}: {why}" if why else str(event.get("event"))
                if found is None or str(event.get("timestamp", "")) >= found[0]:
                    found = (str(event.get("timestamp", "")), text)
    return None if found is None else found[1]


def stop_engine(layout: HomeLayout, timeout: float) -> EngineStopped:
    """Ask the daemon to stop (SIGTERM if the socket is gone) and wait for it to exit."""
    import os
    import signal

    home = layout.root.resolve()
    pid = lock_holder(home)  # the lock's holder, whatever became of the pid file
    if not is_locked(home):
        return EngineStopped(running=False, stopped=False)
    try:
        from nereus.adapters.admin.wire import Empty, Stopping

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
