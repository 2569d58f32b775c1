"""Trusted UTC: an interval that contains the true time, and the decisions made with it.

The engine reads ``[earliest_ms, latest_ms]`` from its clock
(``nereus.engine.runtime.trusted_clock``); the core only decides with it. Uncertainty can delay a
decision, never make it early:

* work is due only when ``earliest >= actionAt``;
* a message has expired only when ``earliest > expireAt``;
* a new admission needs proof that expiry is still open: ``latest <= expireAt``.

Between the last two a message simply waits: neither admitted nor expired.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TrustedTime:
    earliest_ms: int
    latest_ms: int

    def __post_init__(self) -> None:
        if self.latest_ms < self.earliest_ms:
            raise ValueError(f"latest {self.latest_ms} is before earliest {self.earliest_ms}")

    @property
    def uncertainty_ms(self) -> int:
        return self.latest_ms - self.earliest_ms

    def is_due(self, action_at_ms: int) -> bool:
        return self.earliest_ms >= action_at_ms

    def has_expired(self, expire_at_ms: int | None) -> bool:
        return expire_at_ms is not None and self.earliest_ms > expire_at_ms

    def expiry_open(self, expire_at_ms: int | None) -> bool:
        return expire_at_ms is None or self.latest_ms <= expire_at_ms
