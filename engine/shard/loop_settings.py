"""A shard loop's settings: how often it looks, how long it rests when idle
(``idle_wait``), how much it applies at once, and its planner's."""

from __future__ import annotations

from dataclasses import dataclass, field

from nereus.engine.scheduler.round_plan import PlannerSettings


@dataclass(frozen=True, slots=True)
class LoopSettings:
    poll_interval_s: float = 0.005
    idle_wait_s: float = 5.0  # the longest rest of an idle loop (``idle_wait``)
    log_look_s: float = 1.0  # how often, at the least, a resting loop reads its log
    batch_records: int = 2_000
    planner: PlannerSettings = field(default_factory=PlannerSettings)


DEFAULT_LOOP_SETTINGS = LoopSettings()
