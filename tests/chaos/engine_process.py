"""The engine a chaos run drives: started, stopped, signalled, and asked whether it is
quiet.

Two ways to start it, one process either way:

* ``child`` (the default): ``python -m tests.chaos.engine_child`` in a session of its own,
  the real daemon with the control file's clock offset and lane faults
  (``tests.chaos.engine_child``); one process, the single-worker engine;
* ``cli``: ``nereus engine start --workers N`` as an operator runs it (no control file);
  with N > 1 the front door and its worker processes, which the worker nemeses signal.

Every start is owned by ``EngineProcess``: ``close`` stops it (``nereus engine stop``) and,
failing that, SIGKILLs what is left of it, so a run never leaves a daemon behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nereus.adapters.admin.admin_client import AdminClient
from nereus.errors import NereusError
from nereus.layout import HomeLayout
from tests.chaos.client import CliFailed, run_cli
from tests.chaos.history import EngineStart
from tests.polling import WaitTimedOut, wait_until

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 45.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class EngineFailed(Exception):
    """The engine did not start, or did not stop, as asked (with what it printed)."""


def waited(what: str, condition: Callable[[], object], timeout_s: float, *,
           interval_s: float = 0.1, seen: Callable[[], object] | None = None) -> None:
    """``tests.polling.wait_until``, its time-out an ``EngineFailed`` (what a chaos run
    writes to its history)."""
    try:
        wait_until(what, condition, timeout_s, interval_s=interval_s, seen=seen)
    except WaitTimedOut as exc:
        raise EngineFailed(str(exc)) from None


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (None once it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    return process_state(pid) not in (None, "Z", "X")


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return sorted(out)


@dataclass
class EngineProcess:
    home: Path
    control: Path
    launcher: Literal["child", "cli"] = "child"
    workers: int = 1
    starts: int = 0
    on_start: Callable[[EngineStart], None] = field(default=lambda _start: None)
    _proc: subprocess.Popen[bytes] | None = None
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)  # every one started
    _pids: list[int] = field(default_factory=list)

    @property
    def layout(self) -> HomeLayout:
        return HomeLayout(self.home)

    def admin(self, timeout: float = 5.0) -> AdminClient:
        return AdminClient(self.layout.run / "admin.sock", timeout=timeout)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, *, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start it and wait until every shard is ACTIVE; the start is written to the
        history (``on_start``) whether it came up or not."""
        requested = _now_ms()
        try:
            self._start(timeout_s)
        except EngineFailed as exc:
            self.on_start(EngineStart(requested_ms=requested, ready_ms=None, pid=self.pid(),
                                      error=str(exc)[-600:]))
            raise
        self.on_start(EngineStart(requested_ms=requested, ready_ms=_now_ms(), pid=self.pid()))

    def _start(self, timeout_s: float) -> None:
        self.starts += 1
        if self.launcher == "cli":
            try:
                run_cli(self.home, "engine", "start", "--workers", str(self.workers),
                        "--timeout", str(int(timeout_s)), timeout=timeout_s + 30,
                        environ={"NEREUS_WORKERS": str(self.workers)})
            except CliFailed as exc:
                raise EngineFailed(str(exc)) from None
        else:
            out = self.layout.logs / f"chaos-engine-{self.starts}.out"
            out.parent.mkdir(parents=True, exist_ok=True)
            self._proc = self.launch_child(out)
            self._procs.append(self._proc)
            self._pids.append(self._proc.pid)
        self.wait_ready(timeout_s)
        pid = self.pid()
        if pid is not None and pid not in self._pids:
            self._pids.append(pid)

    def launch_child(self, out: Path) -> subprocess.Popen[bytes]:
        """``python -m tests.chaos.engine_child`` of this checkout, its output to ``out``
        (another build's: ``tests/upgrade/rolling.py``)."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
        environ["PYTHONPATH"] = str(ROOT)
        with open(out, "wb") as handle:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.engine_child", "--home", str(self.home),
                 "--workers", "1", "--control", str(self.control)],
                stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=ROOT, env=environ)

    def wait_ready(self, timeout_s: float) -> None:
        """Until the engine answers with every shard ACTIVE."""
        def ready() -> bool:
            if self._proc is not None and self._proc.poll() is not None:
                raise EngineFailed(f"the engine exited with {self._proc.returncode}: "
                                   f"{self.output()}")
            status = self.status()
            return status is not None and bool(status.get("shards")) and all(
                s["state"] == "ACTIVE" for s in status["shards"])

        waited("the engine ready", ready, timeout_s,
               seen=lambda: f"status {self.status()}: {self.output()}")

    def output(self) -> str:
        paths = sorted(self.layout.logs.glob("chaos-engine-*.out"))
        return paths[-1].read_text(errors="replace")[-1_500:] if paths else ""

    def status(self, timeout: float = 5.0) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = self.admin(timeout).get("/v1/status")
        except NereusError:
            return None
        return answer

    def pid(self) -> int | None:
        try:
            text = (self.layout.run / "engine.pid").read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def worker_pids(self) -> list[int]:
        """The worker processes of a front door (``--workers N``); [] for a single engine."""
        pid = self.pid()
        return [] if pid is None else [c for c in children_of(pid)
                                       if b"--worker" in _cmdline(c)]

    def signal(self, sig: int, pid: int | None = None) -> int:
        """Send ``sig`` to ``pid`` (default: the engine's)."""
        target = pid if pid is not None else self.pid()
        if target is None:
            raise EngineFailed("no engine pid to signal")
        os.kill(target, sig)
        return target

    def wait_gone(self, pid: int, timeout_s: float = 30.0) -> None:
        def gone() -> bool:
            if self._proc is not None and self._proc.pid == pid:  # reap our own child
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=0.05)
            return not alive(pid)

        waited(f"pid {pid} ended", gone, timeout_s, interval_s=0.02)
        if self._proc is not None and self._proc.pid == pid:
            self._proc.wait(timeout=10)

    def stop(self, *, timeout_s: float = 60.0) -> None:
        """``nereus engine stop``; the process is gone when it returns."""
        pid = self.pid()
        with contextlib.suppress(CliFailed):
            run_cli(self.home, "engine", "stop", "--timeout", str(int(timeout_s)),
                    timeout=timeout_s + 30)
        if pid is not None:
            self.wait_gone(pid, timeout_s)
        if self._proc is not None:
            self._proc.wait(timeout=timeout_s)
            self._proc = None

    def close(self) -> None:
        """Whatever still runs of every engine this run started (and its workers) is
        continued if stopped and killed."""
        with contextlib.suppress(Exception):
            self.stop(timeout_s=30)
        for pid in [*self.worker_pids(), *self._pids]:
            command = _cmdline(pid)
            if alive(pid) and b"nereus" in command and str(self.home).encode() in command:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(Exception):
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)
                    proc.kill()
                proc.wait(timeout=10)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
