"""How much one round may claim, so that a shard's turn stays short.

A turn applies what the last rounds claimed (each claim comes back as an admission and then
an outcome) and plans the next round. Every lane's due work waits for the turn in progress
to end, so a lane carrying a trickle waits behind a lane draining a herd for as long as a
turn takes: with rounds of hundreds of claims a turn took 150-400 ms, and the trickle's
p99 lateness was over a second (``bench/scale.py``'s herd).

``TurnPace`` keeps what one unit of work costs a turn (a record applied or a claim made:
the turn's time over its units, averaged over the last turns) and lets the next round claim
what keeps a turn near ``target_ms``: each claim costs about two units (its admission and its
outcome). It never allows fewer than ``floor`` claims, so a turn made long by something
else (a backlog of new messages being applied, a slow disk) slows publishing but cannot stop
it. The planner shares a round's allowance across the lanes with due work
(``Planner.round``). ``target_ms = 0`` turns the pace off: rounds are bounded by the lanes'
DRR budgets and the permits alone.
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
