"""Bounded permits: worker (engine-wide), lane, message and bytes in flight, with a share of
the worker and byte pools reserved for every configured lane.

A claim takes one worker permit, one lane permit, the message's single permit and its
payload bytes; they come back when the claim ends (outcome applied, stale admission,
revocation). Shards share the engine-wide worker and byte budgets, so the pool is locked.

**Reserved shares** (seed 000 section 5: a healthy OPEN + READY lane may not disappear
behind unhealthy ones). Half of each pool is reserved, split evenly between the L
configured lanes; the other half is shared:

* each lane is guaranteed ``max(1, worker // (2 L))`` worker permits (never more than
  ``lane_in_flight``; none at all when there are more lanes than worker permits) and
  ``bytes // (2 L)`` payload bytes;
* what a lane holds up to its reserve is its own; only what it holds beyond its reserve
  draws on the shared part, and the shared part is all it can draw on. So a lane below
  its reserve always gets a permit, whatever the other lanes hold, and a lane beyond its
  share can never take the last reserved permits of the others: lanes whose destination
  hangs while READY fill their own reserves and the shared part, never a healthy lane's.

A lane's in-flight stays capped at ``lane_in_flight``. A lane that is not configured (no
reserve) draws on the shared part alone. A message larger than its lane's byte reserve and
the whole shared part together is taken when its lane has no bytes in flight and nothing
draws on the shared bytes (before reserves: when nothing at all was in flight), so it
waits but is never refused for ever. Reserves are recomputed when lanes are added
(``configure``); what lanes already hold is charged again under the new reserves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PermitLimits:
    worker: int = 2_000
    lane: int = 1_000
    bytes: int = 64 << 20


@dataclass(frozen=True, slots=True)
class Reserve:
    """One lane's guaranteed share of the worker and byte pools."""

    permits: int
    bytes: int


def reserves(limits: PermitLimits, lanes: Iterable[str]) -> dict[str, Reserve]:
    """Each configured lane's reserve (module docstring): half of each pool, split evenly."""
    names = sorted(set(lanes))
    if not names:
        return {}
    count = len(names)
    permits = min(max(1, limits.worker // (2 * count)), limits.lane) \
        if count <= limits.worker else 0
    share = Reserve(permits, limits.bytes // (2 * count))
    return dict.fromkeys(names, share)


class Permits:
    def __init__(self, limits: PermitLimits, lanes: Iterable[str] = ()) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self.worker_used = 0
        self.bytes_used = 0
        self.lane_used: dict[str, int] = {}
        self.lane_bytes: dict[str, int] = {}
        self._reserves: dict[str, Reserve] = {}
        self.shared_permits = limits.worker  # what no lane has reserved
        self.shared_bytes = limits.bytes
        self.shared_permits_used = 0  # permits lanes hold beyond their reserves
        self.shared_bytes_used = 0
        self.configure(lanes)

    def configure(self, lanes: Iterable[str]) -> None:
        """Reserve a share for each of ``lanes`` (the configured lanes, all of them)."""
        with self._lock:
            self._reserves = reserves(self.limits, lanes)
            self.shared_permits = self.limits.worker - sum(
                r.permits for r in self._reserves.values())
            self.shared_bytes = self.limits.bytes - sum(
                r.bytes for r in self._reserves.values())
            self.shared_permits_used = sum(
                max(used - self._reserve(lane).permits, 0)
                for lane, used in self.lane_used.items())
            self.shared_bytes_used = sum(
                max(held - self._reserve(lane).bytes, 0)
                for lane, held in self.lane_bytes.items())

    def reserve(self, lane: str) -> Reserve:
        """The lane's guaranteed share (nothing for a lane that is not configured)."""
        with self._lock:
            return self._reserve(lane)

    def _reserve(self, lane: str) -> Reserve:
        return self._reserves.get(lane, _NONE)

    def refusal(self, lane: str, size: int) -> str | None:
        """Why a claim of ``size`` payload bytes on ``lane`` would get no permit now, or
        None (``message explain`` asks this; ``try_acquire`` decides by it)."""
        with self._lock:
            return self._refusal(lane, size)

    def _refusal(self, lane: str, size: int) -> str | None:
        used = self.lane_used.get(lane, 0)
        if used >= self.limits.lane:
            return f"out of permits: lane {lane} has {used} of {self.limits.lane} in flight"
        reserve = self._reserve(lane)
        if used >= reserve.permits and self.shared_permits_used >= self.shared_permits:
            return (f"out of permits: lane {lane} has {used} in flight ({reserve.permits} "
                    f"reserved for it) and the {self.shared_permits} shared permits are "
                    f"taken ({self.worker_used} of {self.limits.worker} in flight)")
        held = self.lane_bytes.get(lane, 0)
        extra = _beyond(held + size, reserve.bytes) - _beyond(held, reserve.bytes)
        if extra and self.shared_bytes_used + extra > self.shared_bytes and not (
                held == 0 and self.shared_bytes_used == 0):
            return (f"out of permits: lane {lane} holds {held} payload bytes "
                    f"({reserve.bytes} reserved for it) and {self.shared_bytes_used} of the "
                    f"{self.shared_bytes} shared are in flight; {size} more do not fit")
        return None

    def try_acquire(self, lane: str, size: int) -> bool:
        with self._lock:
            if self._refusal(lane, size) is not None:
                return False
            reserve = self._reserve(lane)
            used = self.lane_used.get(lane, 0)
            held = self.lane_bytes.get(lane, 0)
            if used >= reserve.permits:
                self.shared_permits_used += 1
            self.shared_bytes_used += _beyond(held + size, reserve.bytes) - \
                _beyond(held, reserve.bytes)
            self.worker_used += 1
            self.bytes_used += size
            self.lane_used[lane] = used + 1
            self.lane_bytes[lane] = held + size
            return True

    def release(self, lane: str, size: int) -> None:
        with self._lock:
            reserve = self._reserve(lane)
            used = self.lane_used.get(lane, 1)
            held = self.lane_bytes.get(lane, size)
            if used > reserve.permits:
                self.shared_permits_used -= 1
            self.shared_bytes_used -= _beyond(held, reserve.bytes) - \
                _beyond(held - size, reserve.bytes)
            self.worker_used -= 1
            self.bytes_used -= size
            self.lane_used[lane] = used - 1
            self.lane_bytes[lane] = held - size

    def in_flight(self, lane: str) -> int:
        with self._lock:
            return self.lane_used.get(lane, 0)


_NONE = Reserve(0, 0)


def _beyond(amount: int, reserve: int) -> int:
    """What of ``amount`` lies beyond ``reserve`` (drawn on the shared part)."""
    return max(amount - reserve, 0)
