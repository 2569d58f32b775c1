"""One engine per home, whatever a careless operator does to the files in ``run/``.

The lock is the home directory's own ``flock``: deleting ``run/engine.pid`` does not let a
second engine in, a database another process holds is "in use" (never "damaged", never
moved aside), and an engine removes only the pid file and socket it made itself.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.cli.engine_homes import one_json
from tests.conftest import run_nereus
from tests.daemon import _is_daemon_of, process_gone, start_engine, stop_engine
from tests.polling import wait_until

NO_SUCH_PID = "4194304\n"  # above the kernel's largest pid_max: never a live process


@contextlib.contextmanager
def owned_daemons(home: Path) -> Iterator[list[int]]:
    """The daemons a test started on ``home``: any still alive at the end are killed
    (on code without a real home lock, a test can leave a second engine behind)."""
    pids: list[int] = []
    try:
        yield pids
    finally:
        for pid in pids:
            if _is_daemon_of(pid, home):
                os.kill(pid, signal.SIGKILL)
                wait_until(f"pid {pid}", functools.partial(process_gone, pid), 10)


def damaged(home: Path) -> list[Path]:
    return sorted((home / "state").rglob("*.damaged-*"))


def test_a_deleted_pid_file_does_not_let_a_second_engine_in(home: Path) -> None:
    """With run/engine.pid deleted, a second start (CLI or the daemon itself) is refused,
    naming the running pid; the first engine's databases stay where they are and it still
    answers on its socket."""
    with owned_daemons(home) as pids:
        first = start_engine(home)
        pids.append(first["pid"])
        (home / "run" / "engine.pid").unlink()

        again = run_nereus("--json", "engine", "start", "--timeout", "30", home=home, timeout=60)
        if again.code == 0:
            pids.append(one_json(again)["pid"])
        assert again.code == 1, again.stdout
        assert "an engine already runs on" in one_json(again)["error"]
        assert f"pid {first['pid']}" in one_json(again)["error"]

        direct = subprocess.run(  # past the CLI's own check: the daemon refuses too
            [sys.executable, "-m", "nereus.engine.hosting.daemon", "--home", str(home.resolve())],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
        assert direct.returncode == 1, direct.stderr
        assert f"an engine already runs on {home.resolve()} (pid {first['pid']})" in direct.stderr

        assert damaged(home) == []
        assert all((home / "state" / "default" / p / "CURRENT").exists() for p in ("0", "1"))
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 0, status.stderr
        assert status.json()["owner_id"].split(":")[1] == str(first["pid"])
        assert all(s["state"] == "ACTIVE" for s in status.json()["shards"])

        stopped = run_nereus("--json", "engine", "stop", "--timeout", "30", home=home, timeout=60)
        assert stopped.code == 0, stopped.stderr
        assert one_json(stopped) == {"running": False, "stopped": True, "pid": first["pid"]}
        wait_until("the engine to exit", lambda: process_gone(first["pid"]), 10)


def test_an_engine_removes_only_the_pid_file_and_socket_it_made(home: Path) -> None:
    """Files put in run/ by someone else while the engine runs survive its stop; the
    stop still finds the engine (by the home's lock, not the pid file) and ends it."""
    run = home / "run"
    with owned_daemons(home) as pids, socket.socket(socket.AF_UNIX) as other:
        started = start_engine(home)
        pids.append(started["pid"])
        (run / "engine.pid").unlink()
        (run / "engine.pid").write_text(NO_SUCH_PID)
        (run / "admin.sock").unlink()
        other.bind(str(run / "admin.sock"))  # another program's socket, not listening

        stopped = run_nereus("--json", "engine", "stop", "--timeout", "30", home=home, timeout=60)
        assert stopped.code == 0, stopped.stderr
        assert one_json(stopped) == {"running": False, "stopped": True, "pid": started["pid"]}
        wait_until("the engine to exit", lambda: process_gone(started["pid"]), 10)
        assert (run / "engine.pid").read_text() == NO_SUCH_PID
        assert (run / "admin.sock").is_socket()


def _hold_database(path: Path) -> subprocess.Popen[str]:
    """A process that opens the shard database for writing and keeps it until stdin ends."""
    code = ("import sys; from pathlib import Path; from nereus.state.store import ShardStore; "
            f"store = ShardStore.open(Path({str(path)!r})); print('open', flush=True); "
            "sys.stdin.read(); store.close()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "open\n"
    return holder


def test_a_database_another_process_holds_is_in_use_not_damaged(home: Path) -> None:
    """An engine start that finds a shard database held by another process fails naming
    that process; the database is not moved aside and nothing is rebuilt in its place."""
    start_engine(home)
    stop_engine(home)
    state = home / "state" / "default" / "0"
    holder = _hold_database(state)
    try:
        result = run_nereus("--json", "engine", "start", "--timeout", "30", home=home, timeout=60)
        if result.code == 0:
            stop_engine(home)
        assert result.code == 1, result.stdout
        text = one_json(result)["error"] + " " + (one_json(result)["hint"] or "")
        assert f"state/default/0 is in use by pid {holder.pid}" in text
        assert damaged(home) == []
        assert (state / "CURRENT").exists()
        assert run_nereus("--json", "engine", "status", home=home).code == 4
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_the_store_names_the_process_that_holds_it(tmp_path: Path) -> None:
    """ShardStore.open of a database held elsewhere raises StoreInUse with the holder's
    pid; the read-only open that offline tools use still works beside it."""
    from nereus.errors import StoreInUse
    from nereus.state.store import ShardStore

    path = tmp_path / "db"
    ShardStore.open(path, create=True).close()
    holder = _hold_database(path)
    try:
        try:
            ShardStore.open(path)
        except StoreInUse as exc:
            assert exc.holder_pid == holder.pid
            assert f"in use by pid {holder.pid}" in exc.message
        else:
            raise AssertionError("opened a database another process holds")
        with ShardStore.open(path, read_only=True) as store:
            assert store.applied_position() is None
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
