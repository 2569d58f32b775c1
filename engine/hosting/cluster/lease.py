"""Lease safety: a node makes a producer call only while its coordinator session is
certainly alive for at least a safety margin longer.

``certain_until_ms`` is the start of the latest acknowledged heartbeat plus the TTL, on the
monotonic clock: the store cannot have expired the session before it. A paused process
(SIGSTOP) or a partitioned one finds, when it runs again, that the instant has passed, and
its publisher's gate refuses the call before it is made.
"""

from __future__ import annotations

from typing import Protocol

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock


class LeasedSession(Protocol):
    """What lease safety reads of a coordinator ``Session``."""

    @property
    def session_id(self) -> int: ...

    def certain_until_ms(self) -> int: ...

    def lost(self) -> bool: ...


class SessionLease:
    """The ``LeaseGate`` of every shard a node owns under one session."""

    def __init__(self, session: LeasedSession, clock: CoordinatorClock, *, margin_ms: int) -> None:
        self.session = session
        self._clock = clock
        self.margin_ms = margin_ms

    def lease_problem(self) -> str | None:
        if self.session.lost():
            return f"its coordinator session {self.session.session_id} is over"
        left = self.session.certain_until_ms() - self._clock.monotonic_ms()
        if left < self.margin_ms:
            return (f"its coordinator session {self.session.session_id} is certainly alive "
                    f"for only {left} ms more (the safety margin is {self.margin_ms} ms)")
        return None
