"""What a ``ShardLoop`` is built from, in three typed parts: the shard's own (``ShardParts``:
its store, log, lanes, evidence key), what the engine shares with every loop
(``EngineParts``: clock, publishers, permits, event log, checkpointer, payload fetch,
settings) and who owns it (``OwnerParts``: owner id, ids, the lease and granted epoch of a
cluster node). ``admission_flow`` wires the planner and admissions from them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.engine.metrics.shard_counters import ShardMetrics
from nereus.engine.publishing.lane_publisher import LanePublisher
from nereus.engine.runtime.event_log import EventLog, null_event_log
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.engine.scheduler.drr import STATE_KEY, load_state
from nereus.engine.scheduler.payloads import FetchPayload
from nereus.engine.scheduler.permits import Permits
from nereus.engine.scheduler.planner import Planner
from nereus.engine.shard.admissions import AdmissionFlow
from nereus.engine.shard.checkpointer import Checkpointer
from nereus.engine.shard.evidence_ring import EvidenceRing
from nereus.engine.shard.lane_policy import LanePolicies
from nereus.engine.shard.loop_settings import DEFAULT_LOOP_SETTINGS, LoopSettings
from nereus.engine.shard.outbox import Outbox
from nereus.engine.shard.ownership import LeaseGate, Ownership
from nereus.engine.shard.progress import ShardProgress
from nereus.evidence_mac import NO_KEYS
from nereus.shard import ShardId
from nereus.state.store import ShardStore


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardParts:
    """The shard's own: where its state and log are, its lanes' wanted policy (handoff
    leads, ordering, limits), the key its evidence MACs use, where checkpoints stage."""

    shard: ShardId
    store: ShardStore
    log: ShardLog
    lanes: LanePolicies
    evidence_keys: EvidenceRing = field(default_factory=lambda: EvidenceRing(NO_KEYS))
    staging: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineParts:
    """What the engine shares with every loop it runs."""

    clock: TrustedClock
    publishers: dict[str, LanePublisher]
    permits: Permits
    settings: LoopSettings = DEFAULT_LOOP_SETTINGS
    events: EventLog = null_event_log
    checkpointer: Checkpointer | None = None
    fetch_payload: FetchPayload | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnerParts:
    """Who owns the shard: its owner id and id source; on a cluster node, the lease its
    producer calls need and the epoch it was granted."""

    owner_id: str
    new_id: Callable[[], str]
    lease: LeaseGate | None = None
    granted_epoch: int | None = None


def admission_flow(shard: ShardParts, engine: EngineParts, owner: OwnerParts, *,
                   ownership: Ownership, outbox: Outbox, progress: ShardProgress,
                   metrics: ShardMetrics) -> AdmissionFlow:
    """The loop's planner (its DRR state resumed from the store) and admissions."""
    store, clock = shard.store, engine.clock
    planner = Planner(
        store, engine.permits, load_state(store.get(STATE_KEY)), engine.settings.planner,
        owner.new_id, fetch_payload=engine.fetch_payload, leads=shard.lanes.leads,
        record_limits={name: publisher.destination.max_record_bytes
                       for name, publisher in engine.publishers.items()},
        monotonic=clock.source.monotonic)
    return AdmissionFlow(
        shard.shard, store, clock=clock, planner=planner, permits=engine.permits,
        publishers=engine.publishers, ownership=ownership, outbox=outbox, progress=progress,
        events=engine.events, evidence_keys=shard.evidence_keys, new_id=owner.new_id,
        watch=metrics)
