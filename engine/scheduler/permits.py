"""Bounded permits: worker (engine-wide), lane, message and bytes in flight.

A claim takes one worker permit, one lane permit, the message's single permit and its
payload bytes; they come back when the claim ends (outcome applied, stale admission,
revocation). Shards share the engine-wide worker and byte budgets, so the pool is locked.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PermitLimits:
    worker: int = 2_000
    lane: int = 1_000
    bytes: int = 64 << 20


class Permits:
    def __init__(self, limits: PermitLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self.worker_used = 0
        self.bytes_used = 0
        self.lane_used: dict[str, int] = {}

    def refusal(self, lane: str, size: int) -> str | None:
        """Why a claim of ``size`` payload bytes on ``lane`` would get no permit now, or
        None (``message explain`` asks this; ``try_acquire`` decides by it)."""
        with self._lock:
            return self._refusal(lane, size)

    def _refusal(self, lane: str, size: int) -> str | None:
        if self.worker_used >= self.limits.worker:
            return f"out of permits: {self.worker_used} of {self.limits.worker} in flight"
        if self.lane_used.get(lane, 0) >= self.limits.lane:
            return (f"out of permits: lane {lane} has {self.lane_used.get(lane, 0)} of "
                    f"{self.limits.lane} in flight")
        if self.bytes_used + size > self.limits.bytes and self.bytes_used > 0:
            return (f"out of permits: {self.bytes_used} payload bytes in flight, "
                    f"{self.limits.bytes} at most")
        return None

    def try_acquire(self, lane: str, size: int) -> bool:
        with self._lock:
            if self._refusal(lane, size) is not None:
                return False
            self.worker_used += 1
            self.bytes_used += size
            self.lane_used[lane] = self.lane_used.get(lane, 0) + 1
            return True

    def release(self, lane: str, size: int) -> None:
        with self._lock:
            self.worker_used -= 1
            self.bytes_used -= size
            self.lane_used[lane] = self.lane_used.get(lane, 1) - 1

    def in_flight(self, lane: str) -> int:
        with self._lock:
            return self.lane_used.get(lane, 0)
