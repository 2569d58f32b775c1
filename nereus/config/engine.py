"""``[engine]``: the daemon's runtime settings (``EngineConfig``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from nereus.config.fields import NonNegative, Positive
from nereus.timespec import parse_duration_ms


class EngineConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[engine]``: the daemon's runtime settings."""

    max_clock_error_ms: NonNegative = 20
    chrony: bool = False  # add chronyd's error estimate; trust the clock only while synced
    evidence_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    stop_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    quantum: Positive = 256  # DRR: claims per lane per round
    # what one round's claims may cost a shard's next turn; lanes with due work wait for a
    # turn, so this bounds their lateness behind a herd (0: rounds bounded by quantum alone)
    turn_target_ms: Annotated[float, msgspec.Meta(ge=0, le=10_000)] = 25
    claim_ttl_ms: Annotated[int, msgspec.Meta(ge=100)] = 30_000
    # a destination call's deadlines: a publish that has not returned by then makes its
    # lane NOT READY and its attempts UNKNOWN (longer than Kafka's own 35 s); a probe that
    # has not, keeps its lane NOT READY saying so
    publish_timeout_ms: Annotated[int, msgspec.Meta(ge=100)] = 60_000
    probe_timeout_ms: Annotated[int, msgspec.Meta(ge=100)] = 10_000
    max_in_flight: Positive = 2_000
    lane_in_flight: Positive = 1_000
    max_in_flight_bytes: Positive = 64 << 20
    poll_interval_ms: Annotated[float, msgspec.Meta(ge=1, le=1_000)] = 5
    # the engine's block cache and memtable budget, shared by every shard database of a
    # process; worker processes split it evenly
    memory_mb: Annotated[int, msgspec.Meta(ge=16, le=1_048_576)] = 256
    # worker processes (`engine start --workers N` overrides); unset: one per core this
    # process may run on, at most one per shard
    workers: Annotated[int, msgspec.Meta(ge=1, le=256)] | None = None
    # the engine's log: "debug" adds a line for each step of every message's life
    # (admitted, published), each carrying its delay message id and attempt id
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # how often the engine collects large payloads nobody can publish any more (what
    # `nereus payload gc --yes` deletes: a swept message's object, an expired reservation;
    # never a Recovery Set member's); "0s" leaves it to the operator
    payload_gc_interval: str = "1h"

    @property
    def payload_gc_interval_s(self) -> float:
        """``payload_gc_interval`` in seconds, 0 for off (checked when the file is read)."""
        return parse_duration_ms(self.payload_gc_interval, field="payload_gc_interval") / 1000
