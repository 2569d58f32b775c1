"""The time a coordinator backend reads: wall time for record timestamps, monotonic time
for session deadlines, and the heartbeat and reaper waits.

The engine's ``Clock`` (``nereus.adapters.time_source``) and the tests' ``FakeClock`` both
have this shape; the adapters cannot import the engine, so the part they need is declared
here. A test that advances a ``FakeClock`` decides when a session expires.
"""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol


class CoordinatorClock(Protocol):
    """Where a coordinator's time comes from."""

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (record timestamps only: never a deadline)."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes back (session deadlines)."""
        ...

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Block until ``event`` is set or ``timeout_s`` has passed on this clock; returns
        whether the event is set."""
        ...


class SystemClock:
    """The operating system's clocks. ``CLOCK_MONOTONIC`` is one clock for every process
    of a host, so deadlines one process writes are read right by the others."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        return event.wait(max(timeout_s, 0.0))


SYSTEM_CLOCK: Final[CoordinatorClock] = SystemClock()
