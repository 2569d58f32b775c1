"""The loop behind the cluster screen: read the coordinator's records once a second.

It runs in one thread worker owned by the cluster screen (so it reads only while the
screen is shown) and knows nothing of Textual: it gets the source, two callbacks (which
post messages, a thread-safe call) and the worker's cancellation event, which ends it
promptly, including during the pause between two reads. It closes the source on its way
out, from the thread that opened it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nereus.errors import NereusError
from nereus.tui.cluster_source import ClusterReading, ClusterSource

OnReading = Callable[[ClusterReading], object]
OnLost = Callable[[str, str | None], object]


def follow_cluster(source: ClusterSource, *, on_reading: OnReading, on_lost: OnLost,
                   stop: threading.Event, interval_s: float = 1.0) -> None:
    """Until ``stop`` is set: read, report the reading or why it failed, wait
    ``interval_s``, read again."""
    try:
        while not stop.is_set():
            try:
                reading = source.read()
            except NereusError as exc:
                if stop.is_set():
                    return
                on_lost(exc.message, exc.hint)
            else:
                if stop.is_set():
                    return
                on_reading(reading)
            stop.wait(interval_s)
    finally:
        source.close()
