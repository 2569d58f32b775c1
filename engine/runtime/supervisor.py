"""Supervision: every worker thread has an owner that restarts it and reports it.

A worker is a *body*, called until its stop flag is set or it raises. ``Supervisor.spawn``
runs one on one thread and, when it raises, logs ``worker_crashed`` with its traceback
(once: the same error again is counted, not logged, for ``REPEAT_LOG_S``, then one line
says how many repeated), counts the restart, keeps the last error for ``engine status``,
waits a capped exponential ``Backoff`` (reset after ``reset_after_s`` of clean running) and
calls the body again. A body keeps what it holds on its object, not in locals, so a restart
resumes where the crash left off. A ``fatal`` exception (damage no restart repairs) or a
crash after ``stopping()`` ends the worker in FAILED. No worker dies silently. Delays and
times come from the engine's ``Clock``, so a ``FakeClock`` drives them in tests.
"""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import msgspec

from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.engine.runtime.event_log import EventLog, null_event_log, safe_event

REPEAT_LOG_S = 60.0  # a crash that repeats the last one logged is logged again after this


class WorkerState(StrEnum):
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    BACKOFF = "BACKOFF"  # crashed; restarting after a delay
    STOPPED = "STOPPED"  # its body returned (asked to stop)
    FAILED = "FAILED"  # a fatal error, or a crash while stopping: not restarted


class WorkerBody(Protocol):
    """A worker's loop: returns when asked to stop, raises when it fails."""

    def __call__(self) -> None: ...


class WorkerStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One worker as ``engine status --json`` shows it (``workers[]``)."""

    name: str
    kind: str  # shard | publisher | evidence | checkpointer | admin
    state: WorkerState
    restarts: int
    last_error: str | None
    last_error_at_ms: int | None


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential restart delay."""

    initial_s: float = 0.1
    cap_s: float = 5.0
    reset_after_s: float = 30.0  # a run this long resets the delay to ``initial_s``

    def delay_s(self, consecutive: int) -> float:
        """The delay before restart number ``consecutive`` (1-based) of a crash streak."""
        growth: float = 2.0 ** max(consecutive - 1, 0)
        return min(self.initial_s * growth, self.cap_s)


class Supervised:
    """One supervised worker thread."""

    def __init__(
        self,
        name: str,
        kind: str,
        body: WorkerBody,
        *,
        events: EventLog,
        backoff: Backoff,
        fatal: tuple[type[BaseException], ...] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.name = name
        self.kind = kind
        self._body = body
        self._events = events
        self._backoff = backoff
        self._fatal = fatal
        self._clock = clock
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.state = WorkerState.STARTING
        self.restarts = 0
        self.last_error: str | None = None
        self.last_error_at_ms: int | None = None
        self._logged: tuple[str, float] | None = None  # the last crash logged: error, when
        self._repeats = 0  # crashes like it since, not logged
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stopping(self) -> None:
        """The owner asked the body to stop: cut a backoff short, restart no more after it."""
        self._stopping.set()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread; True when it has ended."""
        if self._thread.ident is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def status(self) -> WorkerStatus:
        with self._lock:
            return WorkerStatus(name=self.name, kind=self.kind, state=self.state,
                                restarts=self.restarts, last_error=self.last_error,
                                last_error_at_ms=self.last_error_at_ms)

    def _set(self, state: WorkerState) -> None:
        with self._lock:
            self.state = state

    def _run(self) -> None:
        consecutive = 0
        while True:
            self._set(WorkerState.RUNNING)
            began = self._clock.monotonic()
            try:
                self._body()
            except BaseException as exc:  # every failure is reported, none kills silently
                fatal = isinstance(exc, self._fatal) or self._stopping.is_set() or not \
                    isinstance(exc, Exception)
                with self._lock:
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    self.last_error_at_ms = self._clock.wall_ms()
                if self._clock.monotonic() - began >= self._backoff.reset_after_s:
                    consecutive = 0
                consecutive += 1
                delay = self._backoff.delay_s(consecutive)
                said = self._log_crash(exc, fatal=fatal, delay=delay)
                if fatal:
                    self._set(WorkerState.FAILED)
                    if not isinstance(exc, Exception):
                        raise
                    return
                with self._lock:
                    self.restarts += 1
                    self.state = WorkerState.BACKOFF
                # a stop request cuts the backoff short; the body then runs once more to
                # wind down (it sees its own stop flag) and is not restarted after that
                self._clock.wait(self._stopping, delay)
                if said:
                    safe_event(self._events, "worker_restarted", worker=self.name,
                               kind=self.kind, restarts=self.restarts)
                continue
            self._set(WorkerState.STOPPED)
            return

    def _log_crash(self, exc: BaseException, *, fatal: bool, delay: float) -> bool:
        """Log a crash at error (the module's docstring: a repeat of the last one logged is
        counted instead, for ``REPEAT_LOG_S``); whether it was logged."""
        error = self.last_error or ""
        now = self._clock.monotonic()
        last = self._logged
        repeat = last is not None and last[0] == error
        if repeat and not fatal and last is not None and now - last[1] < REPEAT_LOG_S:
            self._repeats += 1
            return False
        fields: dict[str, object] = {
            "worker": self.name, "kind": self.kind, "error": error, "restarts": self.restarts,
            "restarting_in_s": None if fatal else round(delay, 3)}
        if repeat:
            fields["repeated"] = self._repeats  # times since it was last logged, unlogged
        else:
            fields["traceback"] = "".join(traceback.format_exception(exc))
        safe_event(self._events, "worker_crashed", level="error", **fields)
        self._logged, self._repeats = (error, now), 0
        return True


class Supervisor:
    """Owns every worker of an engine; the one place their statuses are read."""

    def __init__(self, events: EventLog = null_event_log, backoff: Backoff = Backoff(),
                 *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.events = events
        self.backoff = backoff
        self.clock = clock
        self._workers: list[Supervised] = []
        self._lock = threading.Lock()

    def spawn(self, name: str, kind: str, body: WorkerBody, *,
              fatal: tuple[type[BaseException], ...] = ()) -> Supervised:
        """Start ``body`` on a supervised thread called ``name``."""
        worker = Supervised(name, kind, body, events=self.events, backoff=self.backoff,
                            fatal=fatal, clock=self.clock)
        with self._lock:  # a name used again (a shard owned again) replaces its ended worker
            self._workers = [w for w in self._workers if w.name != name or w.alive]
            self._workers.append(worker)
        worker.start()
        return worker

    def statuses(self) -> list[WorkerStatus]:
        with self._lock:
            workers = list(self._workers)
        return [worker.status() for worker in workers]

    @property
    def restarts(self) -> int:
        with self._lock:
            return sum(worker.restarts for worker in self._workers)


class _Server(Protocol):
    def shutdown(self) -> None: ...

    def server_close(self) -> None: ...


def stop_serving(server: _Server, worker: Supervised | None) -> None:
    """Stop a server whose ``serve_forever`` runs as ``worker``: say it is stopping (no
    restart), end the loop if it still runs, close the socket, wait for the thread."""
    if worker is not None:
        worker.stopping()
        if worker.alive:
            server.shutdown()
    server.server_close()
    if worker is not None:
        worker.join(5)
