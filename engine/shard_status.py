"""What a shard loop says about itself: its state and a status snapshot.

Readers outside the loop (the admin API, the evidence scanner, the engine's start and
stop) see a shard only through these values and the loop's public methods, never its
claims or events. ``ShardState`` is a ``StrEnum`` so ``engine status --json`` and
``shard list --json`` keep printing the same strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

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
