"""One engine per home: the home directory's lock, the pid file, and removing only the
files this process made.

The lock is an exclusive ``flock`` on the home directory's own file descriptor, held for
the daemon's whole life. Not a lock file: a file can be deleted (or ``run/`` removed)
under a running engine, and the next engine would lock a fresh inode and start beside it,
take the first one's databases for damage and its socket for stale. The directory cannot
be swapped while the engine's files live in it, so every engine of this home meets the
same inode. The kernel drops the lock when the process ends, however it ends.

``run/engine.pid`` is information (which pid holds the lock), written atomically; the
kernel's lock table names the holder even when that file was deleted or rewritten. A
daemon removes its pid file and socket on exit only if they are still the files it made.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from nereus.errors import NereusError
from nereus.layout import HomeLayout


class AlreadyRunning(NereusError):
    """Another daemon holds this home's lock."""


def pid_file(home: Path) -> Path:
    return HomeLayout(home).run / "engine.pid"


def socket_path(home: Path) -> Path:
    return HomeLayout(home).run / "admin.sock"


LOCK_RETRY_S = 1.0  # how long a start waits out a brief probe (``is_locked``) of the lock


def _flock_writers(path: Path) -> list[int] | None:
    """Pids holding an exclusive ``flock`` on ``path``'s inode, from ``/proc/locks``
    (None when the kernel's lock table cannot be read)."""
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    writers = []
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" after "1:"
        if len(fields) >= 6 and fields[1:4] == ["FLOCK", "ADVISORY", "WRITE"] \
                and fields[5] == inode and fields[4].isdigit():
            writers.append(int(fields[4]))
    return writers


def lock_holder(home: Path) -> int | None:
    """The pid of the engine that holds ``home``'s lock, if it can be known: the kernel's
    lock table first (right even when the pid file was deleted or rewritten), else the
    pid file."""
    writers = _flock_writers(home)
    if writers:
        return writers[0]
    return read_pid(home)


def acquire_home_lock(home: Path) -> int:
    """Lock ``home`` for this process's life: an exclusive ``flock`` on the home
    directory's own file descriptor, then write the pid file (information, not the lock).

    Why the directory and not a file in it: a lock file can be deleted (or ``run/``
    removed) under a running engine, and the next engine would lock a fresh inode and
    start beside it. The directory cannot be replaced while the engine's files live in
    it, so every engine of this home meets the same inode. The lock goes when the process
    does, however it ends; a stale pid file is only information.
    """
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    deadline = time.monotonic() + LOCK_RETRY_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            # a CLI probe holds a shared lock for microseconds; an engine holds it for good
            if _flock_writers(home) or time.monotonic() > deadline:
                os.close(fd)
                raise AlreadyRunning(
                    f"an engine already runs on {home} (pid {lock_holder(home) or '?'})",
                    hint="stop it with `nereus engine stop`, or use another --home",
                ) from None
            time.sleep(0.01)
    return fd


def write_pid_file(home: Path) -> os.stat_result:
    """Write ``run/engine.pid`` (atomically, by rename); returns what identifies it."""
    path = pid_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(temp, "w") as handle:
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    return os.stat(path)


def remove_if_ours(path: Path, ours: os.stat_result | None, *,
                   content: bytes | None = None) -> bool:
    """Unlink ``path`` only if it is still the very file this process made: same device,
    inode and change time (an inode number alone can be reused by a file made since) and,
    with ``content``, still those bytes. What someone else put there is not ours to delete.
    """
    if ours is None:
        return False
    try:
        now = os.stat(path)
        if (now.st_dev, now.st_ino, now.st_ctime_ns) != (
                ours.st_dev, ours.st_ino, ours.st_ctime_ns):
            return False
        if content is not None and path.read_bytes() != content:
            return False
        path.unlink()
    except OSError:
        return False
    return True


def read_pid(home: Path) -> int | None:
    try:
        text = pid_file(home).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def is_locked(home: Path) -> bool:
    """True while a live daemon holds the home's lock (whatever became of the pid file)."""
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock
    return False


def orphaned_engine(home: Path) -> int | None:
    """An engine that holds ``home``'s lock while its admin socket is gone (deleted under
    it): its pid (0 if it cannot be told); None when there is no such engine."""
    if socket_path(home).exists() or not is_locked(home):
        return None
    return lock_holder(home) or 0


def _stopping_marker(run_dir: Path) -> Path:
    return run_dir / "admin.stopping"


def mark_stopping(run_dir: Path) -> None:
    """Say, next to the admin socket about to go, that this engine is stopping (its pid)."""
    with contextlib.suppress(OSError):  # information only: else "the socket is gone"
        _stopping_marker(run_dir).write_text(f"{os.getpid()}\n")


def remove_stopping_marker(run_dir: Path) -> None:
    _stopping_marker(run_dir).unlink(missing_ok=True)


def is_stopping(home: Path, pid: int) -> bool:
    """The engine ``pid`` that holds ``home`` closed its socket because it is stopping."""
    try:
        return _stopping_marker(home / "run").read_text().strip() == str(pid)
    except OSError:
        return False


def socket_lost(home: Path, pid: int) -> NereusError:
    """What every command that needs the engine says when its socket is gone: which
    engine runs, and how to get a socket again (``EngineUnreachable``, exit 4); an engine
    that closed its socket to stop is said to be stopping."""
    from nereus.errors import EngineUnreachable

    if pid and is_stopping(home, pid):
        return EngineUnreachable(
            f"the engine (pid {pid}) on {home} is stopping: it closed its admin socket and "
            "is letting its shards go",
            hint="wait until it has exited (`nereus engine status` says when), then "
                 "`nereus engine start` if it should run")
    return EngineUnreachable(
        f"the engine (pid {pid or '?'}) runs on {home}, but its admin socket "
        f"{socket_path(home)} is gone (deleted under it): no command can reach it",
        hint="`nereus engine stop` stops it by its pid from the home's lock (SIGTERM: its "
             "shards drain as on any stop), then `nereus engine start` makes a new socket")
