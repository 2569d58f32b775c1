"""Bounded permits: worker (engine-wide), lane, message and bytes in flight, with a share of
the worker and byte pools reserved for every configured lane.

A claim takes a worker permit, a lane permit, the message's single permit and its payload
bytes, given back when the claim ends; shards share the pools, so they are locked. Half of
each pool is reserved, split evenly between the L configured lanes (``max(1, worker //
(2 L))`` permits, at most ``lane_in_flight``, none when lanes outnumber permits; ``bytes //
(2 L)`` bytes); the rest is shared. What a lane holds up to its reserve is its own; beyond
it draws on the shared part only, so a lane below its reserve always gets a permit and hung
lanes never take a healthy lane's reserve (seed 000 §5). An unconfigured lane draws on the
shared part alone; a message larger than its reserve plus the shared part goes when nothing
else holds those bytes. ``configure`` recomputes reserves when lanes change.
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
