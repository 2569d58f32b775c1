"""The one way a test waits: for a condition, under a deadline.

``now_ms`` is the wall clock as the engine and the brokers stamp time; ``wait_until`` polls
on the monotonic clock and, when the deadline passes, fails the test naming what it waited
for and what it saw last, so a hung run says where it hung. Nothing here sleeps except
between two looks at the condition.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def days_ahead(days: int, *, plus_ms: int = 0) -> str:
    """Midnight UTC ``days`` from today (plus ``plus_ms``), ISO-8601 with ``Z``: a time far
    enough ahead to stay SCHEDULED through a test, and within a lane's default max_delay
    (400 days)."""
    from nereus.timespec import format_time_ms

    day_ms = 86_400_000
    return format_time_ms((now_ms() // day_ms + days) * day_ms + plus_ms)


class WaitTimedOut(AssertionError):
    """A condition a test waited for did not hold by its deadline."""


def wait_until(what: str, condition: Callable[[], T | None], deadline_s: float, *,
               interval_s: float = 0.02, seen: Callable[[], object] | None = None) -> T:
    """Poll ``condition`` every ``interval_s`` until it returns something truthy, and return
    that; after ``deadline_s`` fail naming ``what`` and what was seen last (``seen()``, or
    else the condition's last answer unless that was only False or None)."""
    __tracebackhide__ = True
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            last = seen() if seen is not None else value
            shown = "" if last is None or isinstance(last, bool) else \
                f"; last seen: {repr(last)[:2_000]}"
            raise WaitTimedOut(f"{what}: not reached within {deadline_s} s{shown}")
        time.sleep(interval_s)
