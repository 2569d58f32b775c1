"""The front door's worker processes, each a supervised body (``nereus.engine.runtime.supervisor``):
the body starts the process and waits for it; an exit the front door did not ask for is a
crash, which the supervisor logs (``worker_crashed``), counts and restarts after its
backoff, as it does for the threads of one engine. ``engine status`` shows each as the
worker ``process-<K>``.

Workers run in their own session, so a terminal's Ctrl-C reaches the front door alone and
the front door decides the order of the stop: SIGTERM to every worker (each drains its
shards), then SIGKILL to any still running at the deadline.

A worker that fails says why on its stderr (``error: ...`` in ``worker-<K>.out``); the
exit is reported with that line (``engine status`` shows it as the worker's last error),
and ``exits`` counts the unasked exits, so a front door still starting fails with it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.errors import NereusError
from nereus.layout import HomeLayout


class WorkerProcessExited(NereusError):
    """A worker process ended without being asked to."""


class WorkerProcess:
    """Worker ``index`` of ``count``: its process (restarted by its supervised body)."""

    def __init__(self, home: Path, index: int, count: int, events: EventLog) -> None:
        self.home = home
        self.index = index
        self.count = count
        self._events = events
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.supervised: Supervised | None = None
        self.exits = 0  # exits nobody asked for
        self.last_exit: str | None = None  # the last one, with the worker's own words

    @property
    def pid(self) -> int | None:
        process = self.process
        return None if process is None else process.pid

    def start(self, supervisor: Supervisor) -> None:
        self.supervised = supervisor.spawn(f"process-{self.index}", "process", self.run)

    def run(self) -> None:
        """Start the process and wait for it (the supervised body)."""
        logs = HomeLayout(self.home).logs
        logs.mkdir(parents=True, exist_ok=True)
        with self._lock:
            if self._stopping.is_set():
                return
            out_path = logs / f"worker-{self.index}.out"
            with open(out_path, "ab") as out:
                said = out.tell()  # what this run says on stderr comes after this
                process = subprocess.Popen(
                    [sys.executable, "-P", "-m", "nereus.engine.hosting.daemon",
                     "--home", str(self.home), "--worker", str(self.index),
                     "--workers", str(self.count)],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True,
                    start_new_session=True)
            self.process = process
        safe_event(self._events, "worker_process_started", worker=self.index, pid=process.pid)
        code = process.wait()
        if self._stopping.is_set():
            return
        why = _said(out_path, said)
        self.last_exit = f"worker {self.index} (pid {process.pid}) exited with status " \
            f"{code}" + (f": {why}" if why else "")
        self.exits += 1
        raise WorkerProcessExited(self.last_exit, hint=f"see {logs}/worker-{self.index}.log")

    def terminate(self) -> None:
        """Ask the process to stop (it drains its shards); restart it no more."""
        with self._lock:
            self._stopping.set()
            process = self.process
        if self.supervised is not None:
            self.supervised.stopping()
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> int | None:
        """Wait for the process until the monotonic ``deadline``; SIGKILL it then."""
        process = self.process
        if process is not None:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                safe_event(self._events, "worker_process_killed", level="warning",
                           worker=self.index, pid=process.pid)
                process.kill()
                process.wait()
        if self.supervised is not None:
            self.supervised.join(5)
        return None if process is None else process.returncode


def _said(path: Path, offset: int, limit: int = 64 << 10) -> str | None:
    """The last ``error: ...`` line a worker wrote to its stderr after ``offset`` (without
    the prefix), else its last line; None when it wrote nothing."""
    try:
        with open(path, "rb") as out:
            end = out.seek(0, 2)
            out.seek(max(offset, end - limit))
            lines = [line.strip() for line in out.read().decode(errors="replace").splitlines()
                     if line.strip()]
    except OSError:
        return None
    errors = [line for line in lines if line.startswith("error: ")]
    if errors:
        return errors[-1].removeprefix("error: ")
    return lines[-1] if lines else None


def stop_all(processes: list[WorkerProcess], timeout_s: float) -> None:
    """SIGTERM every worker at once, then wait for each by one deadline."""
    for worker in processes:
        worker.terminate()
    deadline = time.monotonic() + timeout_s
    for worker in processes:
        worker.wait(deadline)
