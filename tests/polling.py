"""Waiting for a condition under a deadline, for the tests that run real engines and brokers.

``now_ms`` is the wall clock as the engine and the brokers stamp time; ``wait_until`` polls
on the monotonic clock and, when the deadline passes, fails the test naming what it waited
for and what it saw last, so a hung run says where it hung. Nothing here sleeps except
between two looks at the condition.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def days_ahead(days: int, *, plus_ms: int = 0) -> str:
    """Midnight UTC ``days`` from today (plus ``plus_ms``), ISO-8601 with ``Z``: a time far
    enough ahead to stay SCHEDULED through a test, and within a lane's default max_delay
    (400 days)."""
    from nereus.timespec import format_time_ms

    day_ms = 86_400_000
    return format_time_ms((now_ms() // day_ms + days) * day_ms + plus_ms)


def wait_until(what: str, condition: Callable[[], bool], deadline_s: float, *,
               interval_s: float = 0.02, seen: Callable[[], object] | None = None) -> float:
    """Poll ``condition`` every ``interval_s`` until it holds (returns the monotonic time it
    did); fail naming ``what`` and ``seen()`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            last = f"; last seen: {seen()}" if seen is not None else ""
            pytest.fail(f"{what}: not reached within {deadline_s} s{last}")
        time.sleep(interval_s)
    return time.monotonic()
