"""A real engine daemon for subprocess-level tests, started and stopped as an operator would.

Every engine a test starts has an owner: ``running_engine`` stops it on the way out with
``nereus engine stop`` and, as a last resort, SIGKILLs the pid in ``<home>/run/engine.pid``
(only after checking that pid really is this home's daemon). Waits go through
``tests.polling.wait_until``, never a blind sleep. A test that runs
``python -m nereus.engine.hosting.daemon`` itself (``DaemonRun``) keeps its children in
``owned_processes``, which kills whatever still runs on the way out.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.polling import wait_until


def engine_pid(home: Path) -> int | None:
    try:
        text = (home / "run" / "engine.pid").read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _is_daemon_of(pid: int, home: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"nereus.engine.hosting.daemon" in cmdline and str(home.resolve()).encode() in cmdline


def kill_engine(home: Path, sig: int = signal.SIGKILL) -> int | None:
    """Signal this home's daemon (if its pid file names a live daemon of this home)."""
    pid = engine_pid(home)
    if pid is None or not _is_daemon_of(pid, home):
        return None
    os.kill(pid, sig)
    return pid


def _state(stat: Path) -> str | None:
    """A process's or thread's state letter from its ``stat`` file (None once it is gone):
    the field after the name, which ends with the last ")"."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie awaiting its reaper counts as gone)."""
    return _state(Path(f"/proc/{pid}/stat")) in (None, "Z", "X")


def process_stopped(pid: int) -> bool:
    """True once every thread of ``pid`` is stopped by a signal (a thread that ended counts)."""
    return all(_state(task / "stat") in (None, "T", "t")
               for task in Path(f"/proc/{pid}/task").iterdir())


def start_engine(home: Path) -> dict[str, Any]:
    result = run_nereus("--json", "engine", "start", "--timeout", "30", home=home, timeout=60)
    assert result.code == 0, result.stderr
    data: dict[str, Any] = result.json()
    return data


def stop_engine(home: Path) -> None:
    """``nereus engine stop``; if that fails, SIGKILL the daemon and wait until it is gone."""
    result = run_nereus("engine", "stop", "--timeout", "20", home=home, timeout=60)
    if result.code == 0:
        return
    pid = kill_engine(home)
    if pid is not None:
        wait_until(f"engine pid {pid} to die", lambda: process_gone(pid), 10)
    raise AssertionError(f"`engine stop` failed ({result.code}): {result.stderr}")


@contextmanager
def running_engine(home: Path) -> Iterator[dict[str, Any]]:
    """An engine on ``home`` for the duration of the block; always stopped afterwards."""
    try:
        yield start_engine(home)
    finally:
        stop_engine(home)


def read_outbox(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a file destination (a torn last line is left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def exit_status(proc: subprocess.Popen[bytes], out_path: Path, *, timeout: float,
                what: str) -> int:
    """The exit status of a daemon asked to stop; if it has not exited within ``timeout``
    s, fail with the stack of every thread it has (SIGQUIT makes it write them to its
    output, ``nereus.engine.hosting.process_requests``) and the end of its output."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        before = out_path.stat().st_size if out_path.exists() else 0
        proc.send_signal(signal.SIGQUIT)
        with contextlib.suppress(AssertionError):  # a process too stuck to answer: say so
            wait_until(f"{what}'s stacks", lambda: out_path.stat().st_size > before and
                       b"most recent call first" in out_path.read_bytes()[before:], 10)
        dumped = out_path.read_bytes()[before:].decode(errors="replace")
        earlier = out_path.read_bytes()[:before].decode(errors="replace")[-3_000:]
        raise AssertionError(
            f"{what} (pid {proc.pid}) did not exit within {timeout} s of being asked to "
            f"stop.\nits output before:\n{earlier}\nits threads:\n"
            f"{dumped or '(no stacks written)'}") from None


@contextmanager
def owned_processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The list a test adds its child processes to; whatever still runs at the end is
    killed (and reaped)."""
    owned: list[subprocess.Popen[bytes]] = []
    try:
        yield owned
    finally:
        for proc in owned:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


class DaemonRun:
    """One run of ``python -m nereus.engine.hosting.daemon``, owned by the test that made it (its
    process goes into ``owned``, from ``owned_processes``, which kills what is left)."""

    def __init__(self, home: Path, run: int, owned: list[subprocess.Popen[bytes]]) -> None:
        from nereus.adapters.admin.admin_client import AdminClient
        from nereus.layout import HomeLayout

        self.home = home
        self.out_path = HomeLayout(home).logs / f"daemon-{run}.out"
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out_path, "wb") as out:  # the child keeps its own copy of the fd
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nereus.engine.hosting.daemon", "--home", str(home),
                 "--workers", "1"],  # the single daemon these tests crash and restart
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )
        owned.append(self.proc)
        self.admin = AdminClient(HomeLayout(home).run / "admin.sock", timeout=10)

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")[-2_000:]

    def status(self) -> dict[str, Any] | None:
        """The admin status document, or None while the socket does not answer."""
        from nereus.errors import NereusError

        try:
            answer: dict[str, Any] = self.admin.get("/v1/status")
        except NereusError:
            return None
        return answer

    def wait_ready(self, deadline_s: float = 40.0) -> None:
        """Until this daemon answers with every shard ACTIVE (its exit fails the test)."""
        def ready() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(f"the daemon exited with {self.proc.returncode}:\n{self.output()}")
            status = self.status()
            return status is not None and status["owner_id"].split(":")[1] == str(
                self.proc.pid) and all(s["state"] == "ACTIVE" for s in status["shards"])

        wait_until("the daemon ready", ready, deadline_s, seen=self.output)

    def caught_up(self) -> bool:
        """The daemon answers, every shard has applied its whole log with nothing in flight
        or claimed, and no message of any lane is SCHEDULED or PUBLISHING."""
        status = self.status()
        if status is None:
            return False
        return (all(s["lag"] == 0 and s["in_flight"] == 0 and s["claims"] == 0
                    for s in status["shards"])
                and not any(lane["messages_by_state"].get("SCHEDULED")
                            or lane["messages_by_state"].get("PUBLISHING")
                            for lane in status["lanes"]))

    def lane(self, name: str) -> dict[str, Any]:
        status = self.status()
        assert status is not None, f"the daemon does not answer:\n{self.output()}"
        (lane,) = [lane for lane in status["lanes"] if lane["lane"] == name]
        assert isinstance(lane, dict), lane
        return lane

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def exit_status(self, timeout_s: float) -> int:
        """Its exit status once it has stopped, or its threads' stacks if it does not."""
        return exit_status(self.proc, self.out_path, timeout=timeout_s, what="the daemon")
