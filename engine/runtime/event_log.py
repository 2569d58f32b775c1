"""The engine's event log seam: one typed Protocol every worker logs through.

An event is a name and keyword fields (``events("lane_not_ready", lane="local",
reason="...")``); the daemon renders them as structured JSON lines. The Protocol is
positional-only for the name and keyword-only for the fields, so a caller that passes a
dict positionally is a type error, not a ``TypeError`` on a worker thread at 3 a.m. (a
publisher once did exactly that and killed its lane on the first failed publish).

``level`` is optional: ``"info"`` unless a field says otherwise (``"warning"``,
``"error"``). Workers never let an event log failure escape (see ``safe_event``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol


class EventLog(Protocol):
    """Where the engine's structured events go."""

    def __call__(self, event: str, /, **fields: object) -> None: ...


def null_event_log(event: str, /, **fields: object) -> None:
    """An event log that drops everything (library use, unit tests)."""


@dataclass
class RecordingEventLog:
    """Keeps every event in memory: for tests and embedding (thread-safe)."""

    events: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, event: str, /, **fields: object) -> None:
        with self._lock:
            self.events.append((event, dict(fields)))

    def named(self, event: str) -> list[dict[str, object]]:
        """The fields of every event called ``event``, in order."""
        with self._lock:
            return [fields for name, fields in self.events if name == event]


def safe_event(events: EventLog, event: str, /, **fields: object) -> None:
    """Log ``event``; a failing event log never takes the calling worker down with it."""
    try:  # not contextlib.suppress: that builds a context manager per event (two a publish)
        events(event, **fields)
    except Exception:  # logging must not be a way for a worker to die
        return
