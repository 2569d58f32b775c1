"""The raw time source beneath the engine: wall and monotonic readings, and the waits whose
length is itself a decision (a restart backoff, a scan interval, an append retry).

One ``Clock`` is chosen by whoever builds the engine and handed down: the Trusted UTC
clock (``clock.TrustedClock``) reads it, and so do the shard loops (claim deadlines, the
clock-ahead hold, checkpoint intervals), the lane publishers (probe interval, publish
timestamps), the evidence scanner, the supervisor (backoff, error times), the file Shard
Log's broker time and the engine's stop deadline. Nothing in a worker calls ``time.time``,
``time.monotonic`` or ``time.sleep`` itself, so a test's ``FakeClock``
(``tests/fake_clock.py``) drives every deadline by ``advance``-ing instead of sleeping.

Waits for *another thread* (an event, a queue, a join) stay real: their timeout only bounds
how long the caller blocks, while whether a deadline has passed is always read from the
Clock. ``wait`` and ``sleep`` are for waits whose length is the point.
"""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol


class Clock(Protocol):
    """Where the engine's time comes from."""

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch; may step either way (NTP, an operator)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""
        ...

    def monotonic_ms(self) -> int:
        """``monotonic`` in whole milliseconds (claim deadlines are kept in these)."""
        ...

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Block until ``event`` is set or ``timeout_s`` has passed on this clock; returns
        whether the event is set."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block until ``seconds`` have passed on this clock."""
        ...


# The monotonic reading: Linux's CLOCK_BOOTTIME where there is one. It counts the time the
# machine spent suspended, as the wall clock does; CLOCK_MONOTONIC (``time.monotonic``)
# stops meanwhile, so after a host suspended for ten minutes the wall clock read ten minutes
# ahead of it: a step forwards Trusted UTC never trusts (``clock.TrustedClock``), and every
# decision was ten minutes late until a restart. Either never goes back.
BOOT_CLOCK: Final = getattr(time, "CLOCK_BOOTTIME", None)


class SystemClock:
    """The operating system's clocks: the Clock of every engine outside tests."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return self._monotonic_ns() / 1e9

    def monotonic_ms(self) -> int:
        return self._monotonic_ns() // 1_000_000

    @staticmethod
    def _monotonic_ns() -> int:
        if BOOT_CLOCK is None:
            return time.monotonic_ns()
        return time.clock_gettime_ns(BOOT_CLOCK)

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        return event.wait(max(timeout_s, 0.0))

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))


SYSTEM_CLOCK: Final[Clock] = SystemClock()
