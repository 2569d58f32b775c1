"""What ``nereus shard inspect`` reports about a shard database, without a full scan.

Messages by state come from the per-lane counters the state machine keeps, the
timeline head from one seek per lane, key counts and sizes from RocksDB properties; so
the report costs the same on a shard with ten messages or ten million.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from nereus.records.vocabulary import MessageState
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Activation, Lane, decode_int, decode_value


@dataclass(frozen=True, slots=True)
class LaneReport:
    lane: str
    gate: str
    messages_by_state: dict[str, int]
    open_attempts: int
    admissions: int
    next_due_ms: int | None
    capacity: int | None
    retry_max: int
    ordered: bool


@dataclass(frozen=True, slots=True)
class ShardReport:
    shard: str
    route: str
    partition: int
    schema_version: int
    applied_position: int | None
    records_applied: int
    messages_by_state: dict[str, int]
    open_obligations: int
    timeline_head_ms: int | None
    paused: bool
    activation: dict[str, Any] | None
    lanes: list[LaneReport]
    estimated_keys: int | None
    live_data_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _next_due(store: ShardStore, lane: str) -> int | None:
    prefix = keys.timeline_lane_prefix(lane)
    for key, _ in store.scan_prefix(prefix):
        return keys.split_timeline_key(key)[1]
    return None


def inspect_store(store: ShardStore) -> ShardReport:
    identity = store.identity()
    lanes: list[LaneReport] = []
    totals = {state.value: 0 for state in MessageState}
    for _, raw in store.scan_prefix(keys.LANE):
        lane = decode_value(raw, Lane)
        for state, count in lane.counts.items():
            totals[state] = totals.get(state, 0) + count
        lanes.append(LaneReport(
            lane=lane.name, gate=lane.gate.value,
            messages_by_state={s.value: lane.counts.get(s.value, 0) for s in MessageState},
            open_attempts=lane.open_attempts, admissions=lane.admissions,
            next_due_ms=_next_due(store, lane.name), capacity=lane.capacity,
            retry_max=lane.retry_max, ordered=lane.ordered,
        ))
    heads = [lane.next_due_ms for lane in lanes if lane.next_due_ms is not None]
    records = store.get(keys.META_RECORDS)
    activation_raw = store.get(keys.META_ACTIVATION)
    activation = None
    if activation_raw is not None:
        value = decode_value(activation_raw, Activation)
        activation = {"owner_id": value.owner_id, "fencing_epoch": value.fencing_epoch,
                      "position": value.position}
    return ShardReport(
        shard=f"{identity.route}/{identity.partition}" if identity else "?",
        route=identity.route if identity else "?",
        partition=identity.partition if identity else -1,
        schema_version=identity.schema_version if identity else -1,
        applied_position=store.applied_position(),
        records_applied=0 if records is None else decode_int(records),
        messages_by_state=totals,
        open_obligations=sum(lane.open_attempts for lane in lanes),
        timeline_head_ms=min(heads) if heads else None,
        paused=store.get(keys.META_PAUSED) is not None,
        activation=activation,
        lanes=lanes,
        estimated_keys=store.property_int("rocksdb.estimate-num-keys"),
        live_data_bytes=store.property_int("rocksdb.estimate-live-data-size"),
    )
