"""An engine's runtime settings, from ``[engine]``: clock error, evidence interval, stop
timeout, the memory budget, payload collection, destination call deadlines, permits and
the shard loops' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nereus.config import EngineConfig
from nereus.engine.publishing.publish_jobs import PROBE_TIMEOUT_S, PUBLISH_TIMEOUT_S
from nereus.engine.scheduler.permits import PermitLimits
from nereus.engine.scheduler.round_plan import PlannerSettings
from nereus.engine.shard.loop_settings import LoopSettings


@dataclass(frozen=True, slots=True)
class EngineSettings:
    max_clock_error_ms: int = 20
    evidence_interval_s: float = 5.0  # how often UNKNOWN attempts are searched for evidence
    chrony: bool = False  # add chronyd's own error estimate to max_clock_error_ms
    stop_timeout_s: float = 10.0
    # every shard database's block cache and memtables together (None: each its own)
    memory_mb: int | None = 256
    # how many shards the budget's memtables are sized for (None: every configured shard).
    # A worker process of N serves its share of the shards, not all of them
    memory_shards: int | None = None
    # how often the engine collects large payloads (``payload_collector``; 0: never). Off
    # unless configured: ``[engine] payload_gc_interval`` (default 1 h) sets it
    payload_gc_interval_s: float = 0.0
    # a destination call's deadlines (``engine/publishing/destination_calls.py``)
    publish_timeout_s: float = PUBLISH_TIMEOUT_S
    probe_timeout_s: float = PROBE_TIMEOUT_S
    permits: PermitLimits = field(default_factory=PermitLimits)
    loop: LoopSettings = field(default_factory=LoopSettings)

    @classmethod
    def from_config(cls, engine: EngineConfig) -> EngineSettings:
        """The runtime settings of ``[engine]`` (already checked by the config schema)."""
        return cls(
            max_clock_error_ms=engine.max_clock_error_ms,
            chrony=engine.chrony,
            evidence_interval_s=engine.evidence_interval_s,
            stop_timeout_s=engine.stop_timeout_s, memory_mb=engine.memory_mb,
            payload_gc_interval_s=engine.payload_gc_interval_s,
            publish_timeout_s=engine.publish_timeout_ms / 1000,
            probe_timeout_s=engine.probe_timeout_ms / 1000,
            permits=PermitLimits(worker=engine.max_in_flight, lane=engine.lane_in_flight,
                                 bytes=engine.max_in_flight_bytes),
            loop=LoopSettings(poll_interval_s=engine.poll_interval_ms / 1000,
                              planner=PlannerSettings(quantum=engine.quantum,
                                                      claim_ttl_ms=engine.claim_ttl_ms,
                                                      turn_target_ms=engine.turn_target_ms)),
        )
