"""A shard loop's settings: how often it looks, how long it rests when idle
(``idle_wait``), how much it applies at once, its planner's, and the feature level it
writes at (``nereus.features``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nereus.engine.scheduler.round_plan import PlannerSettings
from nereus.features import BASE_LEVEL


@dataclass(frozen=True, slots=True)
class LoopSettings:
    poll_interval_s: float = 0.005
    idle_wait_s: float = 5.0  # the longest rest of an idle loop (``idle_wait``)
    log_look_s: float = 1.0  # how often, at the least, a resting loop reads its log
    batch_records: int = 2_000
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    # the feature level in force: at 2, admissions and outcomes go as PUBLISH_BATCH records
    feature_level: int = BASE_LEVEL


DEFAULT_LOOP_SETTINGS = LoopSettings()
