"""Retention: what a shard may forget, when, and the SWEEP that forgets it.

Decided from replicated inputs only (the lane's last LANE_LIMITS, the shard's last
SHARD_RETENTION, the record's broker time, the keys a SWEEP names), so live, replay and
checkpoints remove the same things and keep equal digests. Entries in ``retain``: ``m`` for
a message becoming terminal (broker time + retention; swept with its attempts,
obligations, timeline entry, payload stage and lane counts); ``r`` for a result of a lane
record (+ the lane's dedup window; then its key is free again), or of a record with no lane
window (+ the shard's window); ``j`` for a reject (+ the shard's window); ``p`` for a payload
stage (its expiry + the shard's window; swept unless a SCHEDULE used it). A SCHEDULE that
created a message keeps its result while the message lives and a window after (the ``m``
entry says when), so a retry can never recreate a swept message. SWEEP and RETAIN_BACKFILL
results go after ``SWEEP_RESULT_WINDOW_MS``. With no window replicated everything is kept,
as before (same digests). What had no entry: ``catch_up``. Rules: ``docs/rules.md`` §5.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from nereus.machine.fencing import fenced
from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx
from nereus.machine.verdict import Verdict, applied, rejected, stale
from nereus.records.client import Cancel, Reschedule, Schedule
from nereus.records.system import (
    ClaimResult,
    PublishAdmission,
    PublishOutcome,
    RetainBackfill,
    RouteIdentity,
    Sweep,
)
from nereus.records.vocabulary import TERMINAL_STATES, ResultStatus
from nereus.state import keys
from nereus.state.values import (
    LaneLimit,
    PayloadStage,
    ShardRetentionValue,
    decode_shared,
    decode_value,
)

MAX_SWEEP_ENTRIES: Final = 500  # keys one SWEEP may name (bounds its bytes and its batch)
SWEEP_RESULT_WINDOW_MS: Final = 7 * 24 * 3_600_000  # a SWEEP's own result is kept this long


def _set(value: int | msgspec.UnsetType) -> int:
    return value if isinstance(value, int) else 0


def _lane_of(tx: Tx, record: Any, delay_message_id: str | None) -> str | None:
    cls = type(record)
    if cls is Schedule or cls is PublishAdmission:
        lane: str = record.lane
        return lane
    if delay_message_id is None:
        return None
    message = tx.message(delay_message_id)
    return None if message is None else message.lane


# the records whose results a lane's dedup window covers
LANE_RECORDS: Final = frozenset({Schedule, Cancel, Reschedule, PublishAdmission, PublishOutcome,
                                  ClaimResult})


def shard_window_ms(tx: Tx) -> int:
    """The shard's own dedup window (its last SHARD_RETENTION; 0: none, kept for ever)."""
    raw = tx.get(keys.META_SHARD_RETENTION)
    return 0 if raw is None else decode_shared(raw, ShardRetentionValue).dedup_window_ms


def retain_result(tx: Tx, record: Any, verdict: Verdict, dedup_key: str) -> None:
    """The ``r`` entry of a result just written under ``dedup_key``: after its record's
    lane's dedup window, or the shard's when the record has no lane window (a SWEEP's:
    ``SWEEP_RESULT_WINDOW_MS``; a ROUTE_IDENTITY's: none, it is kept)."""
    cls = type(record)
    if cls is Sweep or cls is RetainBackfill:
        tx.put(keys.retain_key(keys.expire_at(tx.broker_ms, SWEEP_RESULT_WINDOW_MS),
                               keys.RETAIN_RESULT, dedup_key), b"")
        return
    if cls is RouteIdentity:
        return
    window: int | None = None  # None: the record has no lane window, the shard's holds
    if cls in LANE_RECORDS:
        if cls is Schedule and verdict.status == ResultStatus.APPLIED:
            return  # goes with its message (see the module docstring)
        lane = _lane_of(tx, record, verdict.delay_message_id)
        limits: LaneLimit | None = None if lane is None else tx.lane_limits(lane)
        if limits is not None and isinstance(limits.dedup_window_ms, int):
            window = limits.dedup_window_ms  # 0: the lane keeps its results
    if window is None:
        window = shard_window_ms(tx)
    if window:
        tx.put(keys.retain_key(keys.expire_at(tx.broker_ms, window), keys.RETAIN_RESULT,
                               dedup_key), b"")


def retain_reject(tx: Tx) -> None:
    """The ``j`` entry of the ``reject`` result just written at this record's position,
    after the shard's dedup window (none: kept)."""
    window = shard_window_ms(tx)
    if window:
        tx.put(keys.retain_key(keys.expire_at(tx.broker_ms, window), keys.RETAIN_REJECT,
                               str(tx.position)), b"")


def stage_entry_at(expires_at_ms: int, window_ms: int) -> int:
    """When a payload stage's ``p`` entry falls: its reservation's expiry + ``window_ms``.
    ``expires_at_ms`` is the client's, so any integer: the time is held inside a u64."""
    return keys.expire_at(max(expires_at_ms, 0), window_ms)


def retain_stage(tx: Tx, payload_id: str, expires_at_ms: int) -> None:
    """The ``p`` entry of a payload stage just reserved: the shard's dedup window after its
    reservation expires (no window: kept)."""
    window = shard_window_ms(tx)
    if window:
        tx.put(keys.retain_key(stage_entry_at(expires_at_ms, window), keys.RETAIN_PAYLOAD,
                               payload_id), b"")


def drop_unused_stage(tx: Tx, payload_id: str) -> bool:
    """Remove a payload stage no message used (one a message used goes with it)."""
    key = keys.payload_key(payload_id)
    raw = tx.get(key)
    if raw is None or decode_value(raw, PayloadStage).used_by is not None:
        return False
    tx.delete(key)
    return True


def _check_entries(entries: tuple[bytes, ...]) -> Verdict | None:
    if len(entries) > MAX_SWEEP_ENTRIES:
        return rejected(Reason.INVALID_FIELD,
                        f"a SWEEP names at most {MAX_SWEEP_ENTRIES} entries, not {len(entries)}")
    for index, entry in enumerate(entries):
        kind = entry[9:keys.RETAIN_ID_AT]
        if entry[:1] != keys.RETAIN or kind not in keys.RETAIN_KINDS \
                or len(entry) <= keys.RETAIN_ID_AT:
            return rejected(Reason.INVALID_FIELD, f"entries[{index}] is not a retain key")
        try:
            ident = entry[keys.RETAIN_ID_AT:].decode()
        except UnicodeDecodeError:
            return rejected(Reason.INVALID_FIELD, f"entries[{index}] names no utf-8 id")
        if kind == keys.RETAIN_REJECT and not (ident.isascii() and ident.isdigit()):
            return rejected(Reason.INVALID_FIELD, f"entries[{index}] names no position")
    return None


def sweep(tx: Tx, rec: Sweep) -> Verdict:
    """SWEEP: remove each named entry still held and due by this record's broker time: a
    terminal message and what belongs to it (``m``), a result (``r``), a reject (``j``), a
    payload stage no message used (``p``)."""
    failure = _check_entries(rec.entries)
    if failure is not None:
        return failure
    why = fenced(tx, rec.owner_id, rec.fencing_epoch)
    if why is not None:
        return stale(Reason.FENCED, f"sweep refused: {why}")
    messages = results = stages = skipped = 0
    for entry in rec.entries:
        expire_at, kind, ident = keys.split_retain_key(entry)
        value = tx.get(entry)
        if value is None or expire_at > tx.broker_ms:
            skipped += 1  # swept already, or not due at this record's broker time
            continue
        tx.delete(entry)
        if kind == keys.RETAIN_RESULT:
            if tx.get(keys.result_key(ident)) is not None:
                tx.delete(keys.result_key(ident))
                results += 1
        elif kind == keys.RETAIN_REJECT:
            if tx.get(keys.reject_key(int(ident))) is not None:
                tx.delete(keys.reject_key(int(ident)))
                results += 1
        elif kind == keys.RETAIN_PAYLOAD:
            stages += drop_unused_stage(tx, ident)
        elif drop_message(tx, ident, value):
            messages += 1
    # the summary is replicated state: a sweep without stages reads as it always did
    swept = (f"{messages} messages, {results} results and {stages} unused payload stages"
             if stages else f"{messages} messages and {results} results")
    return applied(f"swept {swept}; {skipped} entries already gone or not due")


def drop_message(tx: Tx, delay_message_id: str, keep_result: bytes) -> bool:
    """Remove a terminal message and what belongs to it; its SCHEDULE's result goes now or
    at the time ``keep_result`` names (empty: it stays)."""
    message = tx.message(delay_message_id)
    if message is None or message.state not in TERMINAL_STATES:
        return False
    for attempt_no in range(1, message.attempts + 1):
        number_key = keys.msg_attempt_key(delay_message_id, attempt_no)
        raw = tx.get(number_key)
        if raw is None:
            continue
        attempt_id = raw.decode()
        tx.delete(number_key)
        tx.delete(keys.attempt_key(attempt_id))
        obligation = keys.obligation_key(delay_message_id, attempt_id)
        if tx.get(obligation) is not None:
            tx.delete(obligation)
    if message.work_digest is not None:
        tx.drop_timeline(message)
    if message.payload_ref is not None and tx.get(keys.payload_key(message.payload_ref)):
        tx.delete(keys.payload_key(message.payload_ref))
    tx.forget_message(message)
    result_key = keys.result_key("c/" + message.schedule_command_id)
    if keep_result and tx.get(result_key) is not None:
        until = int.from_bytes(keep_result, "big")
        if until <= tx.broker_ms:
            tx.delete(result_key)
        else:
            tx.put(keys.retain_key(until, keys.RETAIN_RESULT, "c/" + message.schedule_command_id),
                   b"")
    return True
