"""How a shard loop waits after a turn that did nothing.

While the shard holds work in hand or due work it could not take (each waits on time or
another thread), it looks again after ``poll_interval_s``. Otherwise nothing can happen
before the next timeline entry is due (``quiet_for_s``) unless something arrives, so the
loop rests on its wake event until then (``idle_wait_s`` at most, so time-driven chores
still run): a wake-up (appends through this engine, outcomes, requests) ends it at once,
and records other processes append are looked for with one log read, one poll after the
last activity and then twice as long each time, up to ``log_look_s``. An idle shard costs a
read every ``log_look_s`` (``docs/decisions/0009-idle-loops-rest.md``).
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
