"""What a scheduling round is given and gives back: the planner's settings, the owner it
claims for, and the round's plan (claims, expiries, why each lane waited, the next due time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nereus.engine.scheduler.claims import Claim


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    quantum: int = 256
    max_deficit: int = 1_024
    claim_ttl_ms: int = 30_000
    turn_target_ms: float = 25.0  # what a round's claims may cost the next turn (``pace``)


@dataclass
class RoundPlan:
    claims: list[Claim] = field(default_factory=list)
    # CLAIM_RESULT records: proven expiries and proven permanent pre-send errors
    expiries: list[bytes] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # lane -> why it did not progress
    # the earliest actionAt not yet due on a lane that is open and ready (None: nothing on
    # the timeline): before it (by Trusted UTC earliest) a round finds nothing new to claim
    next_due_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Owner:
    owner_id: str
    store_id: str
    fencing_epoch: int
