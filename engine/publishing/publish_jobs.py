"""What a lane publisher is handed: a job (the request, where its result goes, the gate asked
just before the destination call), and the deadlines a destination call runs under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult


class Reply(Protocol):
    """Where a publish result goes (a shard loop's ``reply``): never raises, never blocks."""

    def __call__(self, result: PublishResult, /) -> None: ...


class SendGate(Protocol):
    """Asked just before the destination call: why this job may not be sent now, or None
    (a shard loop's ``live_owner_gate``: a fenced owner makes no further producer call)."""

    def __call__(self) -> str | None: ...


def always_open() -> str | None:
    """The gate of a job nobody fences: always open."""
    return None


# a destination call's deadlines unless the engine says otherwise ([engine] publish_timeout,
# probe_timeout): longer than any adapter's own (Kafka's delivery timeout is 30 s + 5 s)
PUBLISH_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PublishJob:
    """One publish on its way: the request, where its result goes, the gate asked first."""

    request: PublishRequest
    reply: Reply
    gate: SendGate = always_open
