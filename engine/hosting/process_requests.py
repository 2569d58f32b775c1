"""What a daemon process (the engine, a front door, a worker) is asked from outside, and
how it logs: one queue the signal handlers put requests on, one event logger.

A signal handler may run inside a log write or while a lock is held, so it only
``SimpleQueue.put``s a request; the main thread carries it out. The main thread never waits
without a timeout (``ProcessRequests.next`` waits in slices of ``WAKE_S``): a signal taken by
another thread only marks it, and its Python handler runs when the main thread next runs
bytecode, so each slice's end lets it run (``bench/sigterm.py``). SIGQUIT asks nothing of
the main thread: ``faulthandler`` writes every thread's stack to the process's stderr
(``<home>/log/engine.out``, ``worker-K.out``) and the process runs on.
"""

from __future__ import annotations

import faulthandler
import queue
import signal
from typing import Literal, Protocol

from nereus.engine.runtime.event_log import EventLog

Request = Literal["stop", "reopen_logs"]

WAKE_S = 0.5  # the main thread runs signal handlers taken by another thread this often


class ProcessRequests:
    """The requests a daemon process's main thread carries out, in the order asked: from
    its signal handlers, its admin socket's ``POST /v1/shutdown``, its own watchers."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Request] = queue.SimpleQueue()

    def put(self, request: Request) -> None:
        """Ask (safe from a signal handler and from any thread)."""
        self._queue.put(request)

    def get(self, timeout_s: float) -> Request | None:
        """The next request, waiting at most ``timeout_s``; None if none came."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def next(self) -> Request:
        """The next request, however long it takes to come (see the module's docstring
        for why this waits in slices)."""
        while True:
            request = self.get(WAKE_S)
            if request is not None:
                return request


class LevelLogger(Protocol):
    """A structlog logger, as far as the event logger uses it."""

    def info(self, event: str, **fields: object) -> object: ...


def signal_requests() -> ProcessRequests:
    """SIGTERM and SIGINT ask to stop, SIGHUP to reopen the log (logrotate); SIGQUIT
    writes every thread's stack to stderr and changes nothing."""
    requests = ProcessRequests()
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: requests.put("stop"))
    signal.signal(signal.SIGHUP, lambda *_: requests.put("reopen_logs"))
    return requests


def event_logger(logger: LevelLogger, **context: object) -> EventLog:
    """The ``EventLog`` of a process: ``level=`` picks the logger's method (info unless
    said), ``context`` goes on every event that does not set the same field itself (a
    field named twice once made the call raise, and ``safe_event`` dropped the event)."""
    def log_event(event: str, /, **fields: object) -> None:
        level = fields.pop("level", "info")
        method = getattr(logger, str(level), None) or logger.info
        method(event, **{**context, **fields})
    return log_event
