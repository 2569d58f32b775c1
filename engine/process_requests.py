"""What a daemon process (the engine, a front door, a worker) is asked from outside, and
how it logs: one queue the signal handlers put requests on, one event logger.

A signal handler runs between two bytecodes of the main thread, maybe inside a log write
or while it holds a lock, so it must not reopen or write the log itself, nor set a
``threading.Event`` (its lock is not reentrant); ``SimpleQueue.put`` is safe there. The
main thread takes the requests and carries them out.
"""

from __future__ import annotations

import queue
import signal
from typing import Literal, Protocol

from nereus.engine.event_log import EventLog

Request = Literal["stop", "reopen_logs"]


class LevelLogger(Protocol):
    """A structlog logger, as far as the event logger uses it."""

    def info(self, event: str, **fields: object) -> object: ...


def signal_requests() -> queue.SimpleQueue[Request]:
    """SIGTERM and SIGINT ask to stop, SIGHUP to reopen the log (logrotate)."""
    requests: queue.SimpleQueue[Request] = queue.SimpleQueue()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: requests.put("stop"))
    signal.signal(signal.SIGHUP, lambda *_: requests.put("reopen_logs"))
    return requests


def event_logger(logger: LevelLogger, **context: object) -> EventLog:
    """The ``EventLog`` of a process: ``level=`` picks the logger's method (info unless
    said), ``context`` goes on every event."""
    def log_event(event: str, /, **fields: object) -> None:
        level = fields.pop("level", "info")
        method = getattr(logger, str(level), None) or logger.info
        method(event, **context, **fields)
    return log_event
