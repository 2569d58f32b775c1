"""Clocks for tests: ``FakeClock`` moves only when told, ``SkewedClock`` is the system's
clock with a wall-clock error.

Both satisfy ``nereus.adapters.time_source.Clock``. Hand one to an engine
(``Engine(time_source=...)`` or ``running_engine(..., time_source=...)``), a publisher, a
supervisor or an evidence scanner, and every deadline those read — claim TTLs, probe
intervals, restart backoffs, scan intervals, append retries, stop deadlines — follows it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from nereus.adapters.time_source import SystemClock

_NS = 1_000_000_000
_SLICE_S = 0.005  # how often a waiter looks at its event (real s); advance wakes it at once


class FakeClock:
    """A Clock that moves only when told: Trio's ``MockClock`` for threads.

    ``advance(seconds)`` moves wall and monotonic time together; ``step_wall(ms)`` moves
    the wall clock alone, either way (an NTP step; monotonic time never goes back). A thread
    in ``wait`` or ``sleep`` returns once the clock has been advanced to its deadline or
    its event is set, never because real time passed. ``waiters`` counts the threads
    blocked on the clock and ``reads`` the readings taken, so a test can wait for a worker
    to reach its backoff, or to have looked at the clock again, instead of sleeping.

    With ``autojump_threshold_s`` set, a waiter that has seen the clock stand still that
    many real seconds jumps it to the earliest pending deadline, as Trio's autojump does
    once every task is blocked (here: once nobody has moved the clock for a while).
    """

    def __init__(self, *, wall_ms: int = 1_700_000_000_000, monotonic_s: float = 1_000_000.0,
                 autojump_threshold_s: float | None = None) -> None:
        self._lock = threading.Condition()  # guards the readings; notified when time moves
        self._wall_ns = wall_ms * 1_000_000
        self._mono_ns = round(monotonic_s * _NS)
        self.autojump_threshold_s = autojump_threshold_s
        self._deadlines: dict[int, int] = {}  # waiter token -> deadline (monotonic ns)
        self._tokens = itertools.count()
        self._moved_at = time.monotonic()  # real time of the last move (autojump)
        self.reads = 0  # readings taken (wall or monotonic), by any thread

    # readings ---------------------------------------------------------------------------
    def wall_ms(self) -> int:
        with self._lock:
            self.reads += 1
            return self._wall_ns // 1_000_000

    def monotonic(self) -> float:
        with self._lock:
            self.reads += 1
            return self._mono_ns / _NS

    def monotonic_ms(self) -> int:
        with self._lock:
            self.reads += 1
            return self._mono_ns // 1_000_000

    # moving it --------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Move wall and monotonic time forward by ``seconds`` (waiters due wake up)."""
        if seconds < 0:
            raise ValueError(f"time does not go back: advance({seconds!r})")
        with self._lock:
            self._move(round(seconds * _NS))

    def step_wall(self, ms: int) -> None:
        """Step the wall clock alone by ``ms`` (negative: backwards), as NTP or an operator
        would; monotonic time, and so every waiter, is unaffected."""
        with self._lock:
            self._wall_ns += ms * 1_000_000

    def _move(self, ns: int) -> None:
        self._mono_ns += ns
        self._wall_ns += ns
        self._moved_at = time.monotonic()
        self._lock.notify_all()

    @property
    def waiters(self) -> int:
        """Threads blocked in ``wait`` or ``sleep`` right now."""
        with self._lock:
            return len(self._deadlines)

    # waiting ----------------------------------------------------------------------------
    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Until ``event`` is set (True) or the clock reaches now + ``timeout_s`` (False)."""
        with self._lock:
            deadline = self._mono_ns + max(round(timeout_s * _NS), 0)
            token = next(self._tokens)
            self._deadlines[token] = deadline
        try:
            with self._lock:
                while True:
                    if event.is_set():
                        return True
                    if self._mono_ns >= deadline:
                        return False
                    threshold = self.autojump_threshold_s
                    if threshold is not None and \
                            time.monotonic() - self._moved_at >= threshold and \
                            deadline == min(self._deadlines.values()):
                        self._move(deadline - self._mono_ns)
                        continue
                    self._lock.wait(_SLICE_S)
        finally:
            with self._lock:
                del self._deadlines[token]

    def sleep(self, seconds: float) -> None:
        """Until the clock has been advanced by ``seconds``."""
        self.wait(threading.Event(), seconds)


class SkewedClock(SystemClock):
    """The system's clocks, with the wall reading off by ``skew_ms()`` (asked every read):
    a host whose clock is wrong while real time passes as usual."""

    def __init__(self, skew_ms: Callable[[], int]) -> None:
        self._skew_ms = skew_ms

    def wall_ms(self) -> int:
        return super().wall_ms() + self._skew_ms()
