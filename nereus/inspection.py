"""What ``nereus shard inspect`` reports about a shard database, without a full scan.

Messages by state come from the per-lane counters apply keeps, the timeline head from one
seek per lane, sizes from RocksDB properties: the report costs the same at ten messages or
ten million. Disk accounting (``DiskReport``) is RocksDB's own figures: live bytes
(``estimate-live-data-size``), obsolete bytes (SST and WAL beyond them), an **estimate** of
terminal-retained bytes (the terminal share of the lane counters times the message and
attempt families' bytes from the file list), and the oldest retained item (one seek into
``keys.RETAIN``). The report is the command's ``--json`` document (``ShardReport``); the
log's end is an input, from which the lag is worked out.
"""

from __future__ import annotations

import msgspec

from nereus.records.vocabulary import TERMINAL_STATES, MessageState
from nereus.state import keys
from nereus.state.store import LiveFile, ShardStore
from nereus.state.values import Activation, Lane, decode_int, decode_value
from nereus.timespec import format_time_ms


class LaneReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One lane of the shard: its gate, counters and the next due time on its timeline."""

    lane: str
    gate: str
    messages_by_state: dict[str, int]
    open_attempts: int
    admissions: int
    next_due_ms: int | None
    capacity: int | None
    retry_max: int
    ordered: bool
    next_due: str | None  # next_due_ms as UTC text


class ActivationReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The last applied activation barrier: which owner, at which fencing epoch and position."""

    owner_id: str
    fencing_epoch: int
    position: int


class DbReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The database directory and RocksDB's estimates of its keys and live bytes."""

    path: str
    estimated_keys: int | None
    live_data_bytes: int | None


class RetainedItem(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The retained item that expires first: a terminal message, a result or a reject kept until
    ``expire_at_ms``."""

    kind: str  # "message", "result" or "reject" (id: its position)
    id: str
    expire_at_ms: int
    expire_at: str  # expire_at_ms as UTC text


class DiskReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where the database's bytes go, from RocksDB's properties and file list (no scan).
    ``terminal_retained_bytes`` is an estimate (terminal share of the messages times the
    message and attempt families' bytes); null figures are ones RocksDB did not give."""

    live_bytes: int | None
    sst_bytes: int | None
    wal_bytes: int
    obsolete_bytes: int | None
    terminal_messages: int
    terminal_retained_bytes: int | None
    oldest_retained: RetainedItem | None


class ShardReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A shard database at a glance (``nereus shard inspect``); ``lag`` is None when where
    the log ends is not known (no log here)."""

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
    activation: ActivationReport | None
    lanes: list[LaneReport]
    timeline_head: str | None  # timeline_head_ms as UTC text
    log_end_position: int | None
    lag: int | None
    db: DbReport
    disk: DiskReport


def _next_due(store: ShardStore, lane: str) -> int | None:
    prefix = keys.timeline_lane_prefix(lane)
    for key, _ in store.scan_prefix(prefix):
        return keys.split_timeline_key(key)[1]
    return None


def _utc(ms: int | None) -> str | None:
    return None if ms is None else format_time_ms(ms)


def _lanes(store: ShardStore) -> tuple[list[LaneReport], dict[str, int]]:
    """Each lane's report, and the messages by state summed over the lanes."""
    lanes: list[LaneReport] = []
    totals = {state.value: 0 for state in MessageState}
    for _, raw in store.scan_prefix(keys.LANE):
        lane = decode_value(raw, Lane)
        for state, count in lane.counts.items():
            totals[state] = totals.get(state, 0) + count
        next_due_ms = _next_due(store, lane.name)
        lanes.append(LaneReport(
            lane=lane.name, gate=lane.gate.value,
            messages_by_state={s.value: lane.counts.get(s.value, 0) for s in MessageState},
            open_attempts=lane.open_attempts, admissions=lane.admissions,
            next_due_ms=next_due_ms, capacity=lane.capacity,
            retry_max=lane.retry_max, ordered=lane.ordered, next_due=_utc(next_due_ms),
        ))
    return lanes, totals


def _activation(store: ShardStore) -> ActivationReport | None:
    raw = store.get(keys.META_ACTIVATION)
    if raw is None:
        return None
    value = decode_value(raw, Activation)
    return ActivationReport(owner_id=value.owner_id, fencing_epoch=value.fencing_epoch,
                            position=value.position)


_MESSAGE_FAMILIES = frozenset(p[0] for p in (keys.MSG, keys.ATTEMPT, keys.MSG_ATTEMPT))
_RETAINED_KINDS = {keys.RETAIN_MESSAGE: "message", keys.RETAIN_RESULT: "result",
                   keys.RETAIN_REJECT: "reject", keys.RETAIN_PAYLOAD: "payload"}


def family_bytes(files: list[LiveFile], prefixes: frozenset[int]) -> int:
    """Estimated bytes of the key families ``prefixes`` from RocksDB's live files: a file
    within one family counts for it whole, one spanning several is shared evenly."""
    total = 0.0
    for f in files:
        first, last = f.start_key[:1], f.end_key[:1]
        if not first or not last:
            continue
        spanned = range(first[0], last[0] + 1)
        total += f.size * sum(1 for p in spanned if p in prefixes) / len(spanned)
    return round(total)


def _oldest_retained(store: ShardStore) -> RetainedItem | None:
    for key, _ in store.scan_prefix(keys.RETAIN):
        expire_at_ms, kind, ident = keys.split_retain_key(key)
        return RetainedItem(kind=_RETAINED_KINDS.get(kind, kind.hex()), id=ident,
                            expire_at_ms=expire_at_ms, expire_at=format_time_ms(expire_at_ms))
    return None


def _disk(store: ShardStore, totals: dict[str, int]) -> DiskReport:
    live = store.property_int("rocksdb.estimate-live-data-size")
    sst = store.property_int("rocksdb.total-sst-files-size")
    wal = store.wal_bytes()
    terminal = sum(totals.get(state.value, 0) for state in TERMINAL_STATES)
    messages = sum(totals.values())
    retained = None
    if messages:
        retained = round(family_bytes(store.files(), _MESSAGE_FAMILIES) * terminal / messages)
    return DiskReport(
        live_bytes=live, sst_bytes=sst, wal_bytes=wal,
        obsolete_bytes=None if live is None or sst is None else max(0, sst + wal - live),
        terminal_messages=terminal, terminal_retained_bytes=retained,
        oldest_retained=_oldest_retained(store))


def inspect_store(store: ShardStore, *, log_end_position: int | None = None) -> ShardReport:
    """The report of ``store``; ``log_end_position`` is where the shard's log ends (None
    when not known), so the report can say how far the database lags behind it."""
    identity = store.identity()
    lanes, totals = _lanes(store)
    heads = [lane.next_due_ms for lane in lanes if lane.next_due_ms is not None]
    head = min(heads) if heads else None
    records = store.get(keys.META_RECORDS)
    applied = store.applied_position()
    return ShardReport(
        shard=f"{identity.route}/{identity.partition}" if identity else "?",
        route=identity.route if identity else "?",
        partition=identity.partition if identity else -1,
        schema_version=identity.schema_version if identity else -1,
        applied_position=applied,
        records_applied=0 if records is None else decode_int(records),
        messages_by_state=totals,
        open_obligations=sum(lane.open_attempts for lane in lanes),
        timeline_head_ms=head,
        paused=store.get(keys.META_PAUSED) is not None,
        activation=_activation(store),
        lanes=lanes,
        timeline_head=_utc(head),
        log_end_position=log_end_position,
        lag=None if log_end_position is None else
        log_end_position - (0 if applied is None else applied + 1),
        db=DbReport(path=str(store.path),
                    estimated_keys=store.property_int("rocksdb.estimate-num-keys"),
                    live_data_bytes=store.property_int("rocksdb.estimate-live-data-size")),
        disk=_disk(store, totals),
    )
