"""``[lanes.NAME]``: a destination lane (``LaneSettings``) and the defaults of its limits."""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from nereus.config.fields import DEFAULT_RETENTION
from nereus.timespec import parse_duration_ms

DESTINATIONS: Final = ("file", "kafka", "pulsar")
DEFAULT_HANDOFF_LEAD_MS: Final = 1_000
DEFAULT_MAX_DELAY: Final = "400d"  # a lane's max_delay unless its table says otherwise


class LaneSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[lanes.NAME]``: a destination lane."""

    name: str = ""  # the table's name (filled in; not a key of the table)
    destination: Literal["file", "kafka", "pulsar"]
    path: str | None = None  # file: relative to the home, or absolute
    topic: str | None = None  # kafka, pulsar (default: the lane's name)
    bootstrap: str | None = None  # kafka
    kafka: str | None = None  # kafka: the [kafka.NAME] connection (fills in bootstrap)
    # kafka: a topic Nereus creates gets this many replicas (unset: the brokers'
    # default.replication.factor; `doctor` warns below 3)
    replication_factor: Annotated[int, msgspec.Meta(ge=1, le=32)] | None = None
    # kafka, pulsar: fence a dead owner's sends so recovery classifies its in-flight
    # attempts exactly instead of leaving them UNCERTAIN (docs/rules.md §10): kafka, a
    # transactional producer per shard (consumers must read_committed); pulsar, broker
    # deduplication. File lanes always fence (a per-shard writer lock). Off by default
    fencing: bool = False
    service_url: str | None = None  # pulsar
    pulsar: str | None = None  # pulsar: the [pulsar.NAME] connection (fills in both URLs)
    admin_url: str | None = None  # pulsar (doctor checks it)
    # pulsar: "deliver_at" hands each message over lead_ms early and Pulsar holds it
    handoff: Literal["publish", "deliver_at"] = "publish"
    lead_ms: Annotated[int, msgspec.Meta(ge=0, le=86_400_000)] = DEFAULT_HANDOFF_LEAD_MS
    ordered: bool = False  # one key's messages publish in order (placed by key)
    # new work only: a deliverAt further ahead of its record's broker time is REJECTED
    # MAX_DELAY_EXCEEDED ("0s": no limit); a SCHEDULE into a lane holding max_pending
    # unfinished messages on its shard is REJECTED LANE_FULL (0: no limit). Per shard:
    # each shard counts its own part of the lane (apply's counters, so a replay decides
    # the same), so a route of N shards holds up to N x max_pending of the lane
    max_delay: str = DEFAULT_MAX_DELAY
    max_pending: Annotated[int, msgspec.Meta(ge=0)] = 0
    # retention (docs/rules.md): a terminal message (PUBLISHED, CANCELLED, EXPIRED,
    # FAILED) is removed with its attempts this long after it ended ("0s": kept); a
    # result answers a retry of its command for dedup_window, after which a reused
    # command id is a new command ("0s": kept). Broker time, swept through the log.
    retention: str = DEFAULT_RETENTION
    dedup_window: str = DEFAULT_RETENTION

    @property
    def deliver_at_handoff(self) -> bool:
        """The destination holds each message until deliverAt (Pulsar ``deliver_at``)."""
        return self.destination == "pulsar" and self.handoff == "deliver_at"

    @property
    def fencing_kind(self) -> str | None:
        """How this lane fences a dead owner's sends (``engine status``), None: it does not."""
        if self.destination == "file":
            return "file writer lock"
        if not self.fencing:
            return None
        return "kafka transactions" if self.destination == "kafka" else "pulsar deduplication"

    @property
    def max_delay_ms(self) -> int:
        """``max_delay`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.max_delay, field="max_delay")

    @property
    def retention_ms(self) -> int:
        """``retention`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.retention, field="retention")

    @property
    def dedup_window_ms(self) -> int:
        """``dedup_window`` in milliseconds (checked when the file is read)."""
        return parse_duration_ms(self.dedup_window, field="dedup_window")

    @property
    def handoff_lead_ms(self) -> int:
        """How long before deliverAt this lane's destination may be handed a message: its
        ``lead_ms`` for a deliver-at handoff, else 0 (a plain publish is never early). The
        engine replicates it into the lane's policy (LANE_CONFIG), where apply reads it."""
        return self.lead_ms if self.deliver_at_handoff else 0
