"""The loop that keeps the dashboard fed: read the source, report, reconnect, repeat.

It runs in one Textual thread worker owned by the app and knows nothing of Textual: it
gets the source, two callbacks (which post messages to the app, a thread-safe call) and
the worker's cancellation event, which ends it promptly — including during the pause
between reconnection attempts, so quitting never waits for a retry timer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nereus.errors import NereusError
from nereus.tui.source import DashboardSource, Snapshot

OnSnapshot = Callable[[Snapshot], object]
OnLost = Callable[[str, str | None], object]


def follow_feed(source: DashboardSource, *, on_snapshot: OnSnapshot, on_lost: OnLost,
                stop: threading.Event, retry_s: float = 1.0) -> None:
    """Until ``stop`` is set: stream snapshots; on failure or a closed feed report why,
    wait ``retry_s`` and connect again."""
    while not stop.is_set():
        try:
            for snapshot in source.snapshots(stop):
                if stop.is_set():
                    return
                on_snapshot(snapshot)
        except NereusError as exc:
            problem, hint = exc.message, exc.hint
        else:
            problem, hint = f"the engine at {source.where} closed the feed", None
        if stop.is_set():
            return
        on_lost(problem, hint)
        stop.wait(retry_s)
