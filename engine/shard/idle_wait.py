"""How a shard loop waits after a turn that did nothing.

While the shard holds work in hand (claims, records not yet appended) or a round found due
work it could not take (a closed gate, a lane not ready, capacity, quota, an untrusted
clock: each waits on time or on another thread), the loop looks again after
``poll_interval_s``, as it always did. Otherwise nothing can happen before the next
timeline entry is due (``AdmissionFlow.quiet_for_s``) unless something arrives: a wake-up
(records appended through this engine, a publisher outcome, an operator request), or
records another process appended to the Shard Log. The loop then sleeps on its wake event
until the entry is due (``idle_wait_s`` at most, 5 s by default, so time-driven chores such as a
checkpoint by age still run) and meanwhile reads the log now and then (one read: the file
log across processes, the Kafka and Pulsar consumers' local queues): first one poll
interval after the last activity, then twice as long each time, up to ``log_look_s`` (1 s). A
record found, or a wake-up, ends the rest at once and makes the next looks quick again,
so a burst of appends from another process is followed closely, and an idle shard costs a
read every ``log_look_s``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nereus.adapters.time_source import Clock


class IdleWait:
    """The rest between two turns of one shard loop (module docstring)."""

    def __init__(self, wake: threading.Event, stop: threading.Event, time: Clock, *,
                 poll_interval_s: float, log_look_s: float) -> None:
        self._wake = wake
        self._stop = stop
        self._time = time
        self._poll_s = poll_interval_s
        self._look_max_s = max(log_look_s, poll_interval_s)
        self._look_s = poll_interval_s  # the next look's delay: doubles while nothing comes
        self.rests = 0  # rests longer than one poll (for tests and benchmarks)

    def active(self) -> None:
        """The loop just did something: look at the log soon again."""
        self._look_s = self._poll_s

    def rest(self, quiet_s: float, look: Callable[[], bool]) -> None:
        """Wait for a wake-up, ``quiet_s`` on the engine's clock, or a record that ``look``
        (one read of the log, applied) found; just one poll when ``quiet_s`` is shorter."""
        if quiet_s <= self._poll_s:
            self._wake.wait(self._poll_s)
            return
        self.rests += 1
        deadline = self._time.monotonic() + quiet_s
        while not self._stop.is_set():
            remaining = deadline - self._time.monotonic()
            if remaining <= 0:
                return
            if self._wake.wait(min(remaining, self._look_s)) or look():
                self.active()
                return
            self._look_s = min(self._look_s * 2, self._look_max_s)
