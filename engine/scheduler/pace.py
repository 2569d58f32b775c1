"""How much one round may claim, so that a shard's turn stays short.

Every lane's due work waits for the turn in progress, so a lane carrying a trickle waits
behind a lane draining a herd for as long as a turn takes. ``TurnPace`` keeps what one
unit of work (a record applied, a claim made) costs a turn, averaged over the last turns,
and lets the next round claim what keeps a turn near ``target_ms`` (a claim costs about
two units: its admission and outcome), never fewer than ``floor``, so a turn made long by
something else slows publishing but cannot stop it. The planner shares the allowance
across lanes (``Planner.round``); ``target_ms = 0`` turns it off. Why and the figures:
``docs/decisions/0010-turn-pace.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

UNITS_PER_CLAIM = 2  # an admission and an outcome applied
SMOOTHING = 0.2  # weight of the newest turn in the average cost


@dataclass(slots=True)
class TurnPace:
    target_ms: float
    floor: int = 32
    cost_ms: float = 0.0  # what one unit of work costs a turn (0: not measured yet)

    def allowance(self) -> int | None:
        """How many claims the next round may make (None: no limit)."""
        if self.target_ms <= 0 or self.cost_ms <= 0:
            return None
        return max(self.floor, int(self.target_ms / (UNITS_PER_CLAIM * self.cost_ms)))

    def turn_took(self, took_ms: float, units: int) -> None:
        """A turn that applied and claimed ``units`` took ``took_ms``; a turn that did
        nothing says nothing of the cost."""
        if units <= 0:
            return
        sample = took_ms / units
        self.cost_ms = sample if self.cost_ms <= 0 else (
            self.cost_ms + SMOOTHING * (sample - self.cost_ms))
