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

    def try_acquire(self, lane: str, size: int) -> bool:
        with self._lock:
            if self.worker_used >= self.limits.worker:
                return False
            if self.lane_used.get(lane, 0) >= self.limits.lane:
                return False
            if self.bytes_used + size > self.limits.bytes and self.bytes_used > 0:
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
