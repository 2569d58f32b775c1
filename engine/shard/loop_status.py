"""What a shard loop says about itself: its state and a status snapshot.

Readers outside the loop (the admin API, the evidence scanner, the engine's start and
stop) see a shard only through these values and the loop's public methods, never its
claims or events. ``ShardState`` is a ``StrEnum`` so ``engine status --json`` and
``shard list --json`` keep printing the same strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from nereus.errors import NereusError
from nereus.shard import ShardId


class ShardState(StrEnum):
    STARTING = "STARTING"  # built, its loop not running yet
    RECOVERING = "RECOVERING"  # replaying, activating its fencing epoch
    ACTIVE = "ACTIVE"  # applying and claiming
    DEGRADED = "DEGRADED"  # its loop crashed; no claims until the supervisor restarts it
    STOPPING = "STOPPING"  # no new claims; applying and recording outcomes
    STOPPED = "STOPPED"  # its loop ended after a stop
    FAILED = "FAILED"  # damage no restart repairs (a diverged or corrupt log)
    FENCED = "FENCED"  # another owner activated a later epoch; this one let the shard go


# a loop in one of these states has finished starting (wait_active stops waiting)
SETTLED_STATES = frozenset({ShardState.ACTIVE, ShardState.FAILED, ShardState.FENCED})
# a loop in one of these states applies nothing more (wait_applied stops waiting)
ENDED_STATES = frozenset({ShardState.FAILED, ShardState.STOPPED, ShardState.FENCED})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardStatus:
    """One shard loop at one instant (``ShardLoop.status()``), as ``shards()`` reports it.

    Counts are read without stopping the loop, so two of them may be one step apart."""

    shard: ShardId
    state: ShardState
    epoch: int  # the fencing epoch this owner activated (0 before recovery)
    applied_position: int | None  # the last applied and synced log position
    claims: int  # live claims (admission appended or about to be, not yet settled)
    in_flight: int  # attempts handed to a lane publisher, outcome not yet applied
    pending_admissions: int  # claimed, not yet handed to a publisher
    admissions: int  # admissions of this loop applied as winners since it started
    publish_outcomes: int  # outcomes that released one of this loop's claims
    error: str | None  # why the loop is FAILED or DEGRADED (None when healthy)
    waiting: str | None  # why an ACTIVE shard admits nothing right now (None: it may)


def error_text(exc: BaseException) -> str:
    """An error as an operator reads it: a Nereus error's message, else its type and text."""
    return exc.message if isinstance(exc, NereusError) else f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusedShard:
    """A shard granted to this engine (a cluster node's, a worker process's) whose opening
    raised: it has no loop, and ``engine status`` lists it FAILED with ``reason``."""

    reason: str  # what a single engine's start prints after "error: "
    hint: str | None
    epoch: int  # the fencing epoch it was granted

    @classmethod
    def of(cls, exc: BaseException, *, epoch: int) -> RefusedShard:
        return cls(reason=error_text(exc), epoch=epoch,
                   hint=exc.hint if isinstance(exc, NereusError) else None)

    @property
    def error(self) -> str:
        """The reason with its way out, as ``engine status`` shows it."""
        return self.reason + (f"; {self.hint}" if self.hint else "")
