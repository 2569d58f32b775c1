"""Retention: what a shard may forget, when, and the SWEEP that forgets it.

Everything here is decided from replicated inputs only — the lane's replicated retention
and dedup window (its last LANE_LIMITS), the broker time of the record being applied and
the keys a SWEEP record names — so the live shard, a replay from empty and a replay from
any checkpoint remove exactly the same things and keep equal digests.

* A message that becomes terminal (PUBLISHED, CANCELLED, EXPIRED, FAILED) in a lane with a
  ``retention_ms`` gets an ``m`` entry in ``retain`` at broker time + retention. Swept, it
  takes the message, its attempts (``attempt``, ``msgattempt``, any ``obligation``), its
  timeline entry and its payload stage with it, and leaves the lane's counts by state.
* A result of a record of a lane with a ``dedup_window_ms`` (CANCEL, RESCHEDULE, a
  rejected SCHEDULE, PUBLISH_ADMISSION, PUBLISH_OUTCOME, CLAIM_RESULT) gets an ``r`` entry
  at broker time + window. Swept, the record's dedup key is free again: a record reusing
  it is a new record.
* The result of a SCHEDULE that created a message is never removed before the message: a
  retry of the very same SCHEDULE must answer its first result as long as the message
  exists, and once both were gone it would create a second message with the same
  delayMessageId (and publish it again; a cancelled one would come back). It gets no
  entry of its own; the message's ``m`` entry holds when it may go (terminal time + the
  dedup window, which is at least the SCHEDULE's broker time + the window), and sweeping
  the message removes it then or gives it an ``r`` entry for that time.
* A result whose record has no lane window — barriers, checkpoint marks, operator
  mutations, payload stages, query barriers, a command naming no message, a record of a
  lane whose limits carry no dedup window — gets an ``r`` entry after the *shard's* dedup
  window, and a ``reject`` result a ``j`` entry (its position) after the same window.
  That window is replicated too: the shard's last SHARD_RETENTION (``meta/shard_retention``,
  ``[routes.NAME] dedup_window``), never local configuration read at apply time.
* A payload stage gets a ``p`` entry when it is reserved, at its reservation's expiry +
  the shard's dedup window. Swept, the stage goes unless a message's SCHEDULE used it
  (``used_by``): a reservation that expired without a commit, or a payload committed and
  never used, leaves nothing behind; a used one goes with its message's ``m`` entry. One
  reserved while the shard had no window is caught up once one is given (a
  SHARD_RETENTION asking ``catch_up`` records ``stage_catch_up``; the owner's
  RETAIN_BACKFILL names such stages in ``payload_ids``; ``stage_catch_up_of``).
* Results written while the shard had no window have no entry either: a SHARD_RETENTION
  asking ``catch_up_results`` (the engine sets it) that gives a window the shard had not
  adds a ``ResultCatchUp`` for the positions from the start, or from the record that made
  the window 0 (its ``position``), up to it; the owner's RETAIN_BACKFILL names the
  ``reject`` results (``reject_positions``) and the results of records that never have a
  lane window (``SHARD_WINDOW_KINDS``, ``result_keys``) written there, each given its
  entry at that record's broker time + the window (``result_catch_up_of``,
  ``reject_catch_up_of``). A result with an entry of its own is never in such a range, so
  no result gets two (one could outlive it and remove a later result reusing its key).
  Results of lane records written under no window (their lane's 0, or the shard's when
  the lane had none) are not caught up: which window held for them is not in the state.
* A SWEEP's own result is kept for ``SWEEP_RESULT_WINDOW_MS``, and so is a RETAIN_BACKFILL's;
  a ROUTE_IDENTITY's (one per shard) is kept.
* Catch-up: messages that ended before their lane first had a retention have no entry,
  and one record cannot scan them all. The LANE_LIMITS that first gives a lane a retention
  (asking for it: ``catch_up``, which the engine sets) records the lane's ``catch_up``:
  its position, and the time such a message goes (that record's broker time + the
  retention; its SCHEDULE result: + the dedup window). The owner then finds them with a
  cursor of its own and appends RETAIN_BACKFILL records naming at most 500; apply gives
  each one still eligible — terminal, ``updated_position`` before that position, no
  catch-up entry yet (the key is fixed per lane, so a second naming is a no-op) — its
  ``m`` entry at that time, or removes it at once when the time has passed. A message
  ending under a retention has its own entry.
* A retention given back after 0 (kept) is caught up the same way, when the LANE_LIMITS
  ask for it (``catch_up_kept``, which the engine sets): the one making it 0 records
  where (``kept_since``; 0 when the lane had no retention before), the one giving it back
  adds a catch-up for what ended from there to it (``later_catch_ups``, with its own
  time). The catch-ups' ranges never meet and none holds a message that ended under a
  retention, so no message gets two entries (a second one could outlive the message and
  remove a later one reusing its id). ``catch_up_of`` finds the one covering a message.

Lanes whose limits carry neither (UNSET: replicated before retention existed; or 0) keep
everything, and shards that never applied a SHARD_RETENTION keep every result without a
lane window and every reject, exactly as before, so state replayed from logs written
before either has the same digest as it always had.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from nereus.machine.fencing import fenced
from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx
from nereus.machine.verdict import Verdict, applied, rejected, stale
from nereus.records.client import Cancel, Reschedule, Schedule
from nereus.records.codec import KINDS
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
    Message,
    PayloadStage,
    Result,
    ResultCatchUp,
    RetainCatchUp,
    ShardRetentionValue,
    StageCatchUp,
    decode_value,
)

MAX_SWEEP_ENTRIES: Final = 500  # keys one SWEEP may name (bounds its bytes and its batch)
MAX_REJECT_POSITION: Final = 2**64 - 1  # a reject key holds its position as u64
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
_LANE_RECORDS: Final = frozenset({Schedule, Cancel, Reschedule, PublishAdmission, PublishOutcome,
                                  ClaimResult})


# the kinds whose result always has the shard's window, never a lane's (so none of their
# results has an entry of its own while that is 0): not a record a lane window may cover,
# nor a SWEEP or RETAIN_BACKFILL (a fixed window) or a ROUTE_IDENTITY (kept)
SHARD_WINDOW_KINDS: Final = frozenset(
    kind for cls, kind in KINDS.items()
    if cls not in _LANE_RECORDS and cls not in (Sweep, RetainBackfill, RouteIdentity))


def shard_window_ms(tx: Tx) -> int:
    """The shard's own dedup window (its last SHARD_RETENTION; 0: none, kept for ever)."""
    raw = tx.get(keys.META_SHARD_RETENTION)
    return 0 if raw is None else decode_value(raw, ShardRetentionValue).dedup_window_ms


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
    if cls in _LANE_RECORDS:
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


def _stage_entry_at(expires_at_ms: int, window_ms: int) -> int:
    """When a payload stage's ``p`` entry falls: its reservation's expiry + ``window_ms``.
    ``expires_at_ms`` is the client's, so any integer: the time is held inside a u64."""
    return keys.expire_at(max(expires_at_ms, 0), window_ms)


def retain_stage(tx: Tx, payload_id: str, expires_at_ms: int) -> None:
    """The ``p`` entry of a payload stage just reserved: the shard's dedup window after its
    reservation expires (no window: kept)."""
    window = shard_window_ms(tx)
    if window:
        tx.put(keys.retain_key(_stage_entry_at(expires_at_ms, window), keys.RETAIN_PAYLOAD,
                               payload_id), b"")


def stage_catch_up(get: Callable[[bytes], bytes | None]) -> StageCatchUp | None:
    """The shard's stage catch-up (``ShardRetentionValue.stage_catch_up``), if it has one;
    ``get`` reads the state (apply's transaction, or the owner's store)."""
    raw = get(keys.META_SHARD_RETENTION)
    found = None if raw is None else decode_value(raw, ShardRetentionValue).stage_catch_up
    return found if isinstance(found, StageCatchUp) else None


def retain_committed_stage(tx: Tx, reserved: PayloadStage) -> None:
    """At PAYLOAD_COMMIT: a stage reserved before the shard's stage catch-up (while it had
    no window) has no ``p`` entry, and the commit moves it out of the catch-up's range, so
    it gets its entry now (at its expiry + the shard's window; none while that is 0)."""
    catch_up = stage_catch_up(tx.get)
    if catch_up is not None and reserved.position < catch_up.before_position:
        retain_stage(tx, reserved.payload_id, reserved.expires_at_ms)


def _drop_unused_stage(tx: Tx, payload_id: str) -> bool:
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
            stages += _drop_unused_stage(tx, ident)
        elif _drop_message(tx, ident, value):
            messages += 1
    # the summary is replicated state: a sweep without stages reads as it always did
    swept = (f"{messages} messages, {results} results and {stages} unused payload stages"
             if stages else f"{messages} messages and {results} results")
    return applied(f"swept {swept}; {skipped} entries already gone or not due")


def _check_backfill(rec: RetainBackfill, stage_ids: tuple[str, ...], result_keys: tuple[str, ...],
                    reject_positions: tuple[int, ...]) -> Verdict | None:
    named = len(rec.delay_message_ids) + len(stage_ids) + len(result_keys) + \
        len(reject_positions)
    if named > MAX_SWEEP_ENTRIES:
        what = ("messages, payload stages and results"
                if result_keys or reject_positions else
                "messages and payload stages" if stage_ids else "messages")
        return rejected(Reason.INVALID_FIELD, f"a RETAIN_BACKFILL names at most "
                        f"{MAX_SWEEP_ENTRIES} {what}, not {named}")
    for index, position in enumerate(reject_positions):
        if not 0 <= position <= MAX_REJECT_POSITION:
            return rejected(Reason.INVALID_FIELD, f"reject_positions[{index}] is not a log "
                            f"position (0 to {MAX_REJECT_POSITION}): {position}")
    return None


def backfill(tx: Tx, rec: RetainBackfill) -> Verdict:
    """RETAIN_BACKFILL: give each named message its lane's catch-up entry, or remove it at
    once when that time has passed; the same for each named payload stage and the shard's
    stage catch-up, and each named result and reject and the shard's result catch-ups;
    skip every id the state does not make eligible."""
    stage_ids = rec.payload_ids if isinstance(rec.payload_ids, tuple) else ()
    result_keys = rec.result_keys if isinstance(rec.result_keys, tuple) else ()
    reject_positions = rec.reject_positions if isinstance(rec.reject_positions, tuple) else ()
    failure = _check_backfill(rec, stage_ids, result_keys, reject_positions)
    if failure is not None:
        return failure
    why = fenced(tx, rec.owner_id, rec.fencing_epoch)
    if why is not None:
        return stale(Reason.FENCED, f"retention catch-up refused: {why}")
    more = _backfill_stages(tx, stage_ids) if stage_ids else ""
    if result_keys or reject_positions:
        more += _backfill_results(tx, result_keys, reject_positions)
    entries = removed = skipped = 0
    for delay_message_id in rec.delay_message_ids:
        catch_up = catch_up_of(tx.get, tx.message(delay_message_id))
        if catch_up is None:
            skipped += 1
            continue
        keep_result = (catch_up.result_until_ms.to_bytes(8, "big")
                       if catch_up.result_until_ms else b"")
        if catch_up.expire_at_ms <= tx.broker_ms:
            _drop_message(tx, delay_message_id, keep_result)
            removed += 1
        else:
            tx.put(keys.retain_key(catch_up.expire_at_ms, keys.RETAIN_MESSAGE,
                                   delay_message_id), keep_result)
            entries += 1
    return applied(f"caught up {entries + removed} messages ({entries} retained, {removed} "
                   f"removed); {skipped} not eligible{more}")


def _backfill_stages(tx: Tx, payload_ids: tuple[str, ...]) -> str:
    """The stage part of a RETAIN_BACKFILL; what it did, for the result."""
    entries = removed = skipped = 0
    for payload_id in payload_ids:
        found = stage_catch_up_of(tx.get, payload_id)
        if found is None:
            skipped += 1
        elif found[1] <= tx.broker_ms:
            removed += _drop_unused_stage(tx, payload_id)
        else:
            tx.put(found[0], b"")
            entries += 1
    return (f"; {entries + removed} payload stages caught up ({entries} retained, {removed} "
            f"removed), {skipped} not eligible")


def _backfill_results(tx: Tx, result_keys: tuple[str, ...],
                      reject_positions: tuple[int, ...]) -> str:
    """The result part of a RETAIN_BACKFILL; what it did, for the result."""
    entries = removed = skipped = 0
    named = [(keys.result_key(key), result_catch_up_of(tx.get, key)) for key in result_keys]
    named += [(keys.reject_key(position), reject_catch_up_of(tx.get, position))
              for position in reject_positions]
    for held, found in named:
        if found is None:
            skipped += 1
        elif found[1] <= tx.broker_ms:
            tx.delete(held)
            removed += 1
        else:
            tx.put(found[0], b"")
            entries += 1
    return (f"; {entries + removed} results caught up ({entries} retained, {removed} "
            f"removed), {skipped} not eligible")


def _result_catch_ups(get: Callable[[bytes], bytes | None]) -> tuple[ResultCatchUp, ...]:
    raw = get(keys.META_SHARD_RETENTION)
    return () if raw is None else decode_value(raw, ShardRetentionValue).catch_ups()


def _covering(get: Callable[[bytes], bytes | None], catch_ups: tuple[ResultCatchUp, ...],
              position: int, kind: bytes, ident: str) -> tuple[bytes, int] | None:
    for catch_up in catch_ups:
        if catch_up.covers(position):
            key = keys.retain_key(catch_up.expire_at_ms, kind, ident)
            return None if get(key) is not None else (key, catch_up.expire_at_ms)
    return None


def result_catch_up_of(get: Callable[[bytes], bytes | None],
                       dedup_key: str) -> tuple[bytes, int] | None:
    """The catch-up entry (key, time) the result under ``dedup_key`` should get now (None:
    not eligible): it exists, its record's kind always has the shard's window
    (``SHARD_WINDOW_KINDS``), it was written in the range of one of the shard's result
    catch-ups (while the shard had no window, so it has no entry of its own, and its key
    was not reused meanwhile: nothing removed it), and has no entry of that catch-up yet.
    A result written under a window, with an entry of its own, is never named a second
    time: such an entry could outlive it and remove a later result reusing its key."""
    catch_ups = _result_catch_ups(get)
    if not catch_ups:
        return None
    held = get(keys.result_key(dedup_key))
    if held is None:
        return None
    result = decode_value(held, Result)
    if result.kind not in SHARD_WINDOW_KINDS:
        return None
    return _covering(get, catch_ups, result.position, keys.RETAIN_RESULT, dedup_key)


def reject_catch_up_of(get: Callable[[bytes], bytes | None],
                       position: int) -> tuple[bytes, int] | None:
    """The catch-up entry (key, time) the ``reject`` result at ``position`` should get now
    (None: not eligible): it exists, was written in the range of one of the shard's
    result catch-ups, and has no entry of that catch-up yet."""
    catch_ups = _result_catch_ups(get)
    if not catch_ups or get(keys.reject_key(position)) is None:
        return None
    return _covering(get, catch_ups, position, keys.RETAIN_REJECT, str(position))


def stage_catch_up_of(get: Callable[[bytes], bytes | None],
                      payload_id: str) -> tuple[bytes, int] | None:
    """The catch-up entry (key, time) a payload stage should get now (None: not
    eligible): the shard has a stage catch-up, the stage exists, no message used it, it
    last changed before the catch-up, and has no entry at that time yet (one reserved
    under the same window has it already). The time is its reservation's expiry + the
    catch-up's window, held inside a u64. A stage named twice is a no-op; one with an
    entry of its own at another time gets a second, which is harmless: payload ids are
    never reused, and sweeping a stage that is gone does nothing."""
    catch_up = stage_catch_up(get)
    if catch_up is None:
        return None
    held = get(keys.payload_key(payload_id))
    if held is None:
        return None
    stage = decode_value(held, PayloadStage)
    if stage.used_by is not None or stage.position >= catch_up.before_position:
        return None
    at = _stage_entry_at(stage.expires_at_ms, catch_up.window_ms)
    key = keys.retain_key(at, keys.RETAIN_PAYLOAD, payload_id)
    return None if get(key) is not None else (key, at)


def catch_up_of(get: Callable[[bytes], bytes | None],
                message: Message | None) -> RetainCatchUp | None:
    """The catch-up that applies to ``message`` now (None: not eligible): it is terminal,
    ended in the range of one of its lane's catch-ups (before its first retention, or
    while the retention was 0 and before it was given back), and has no entry of that
    catch-up yet. A message that ended under a retention has its own entry; one created
    after a sweep ended later still. ``get`` reads the state (apply's transaction, or the
    owner's store when it looks for them)."""
    if message is None or message.state not in TERMINAL_STATES:
        return None
    raw = get(keys.lane_limits_key(message.lane))
    if raw is None:
        return None
    for catch_up in decode_value(raw, LaneLimit).catch_ups():
        if not catch_up.covers(message.updated_position):
            continue
        if get(keys.retain_key(catch_up.expire_at_ms, keys.RETAIN_MESSAGE,
                               message.delay_message_id)) is not None:
            return None
        return catch_up
    return None


def _drop_message(tx: Tx, delay_message_id: str, keep_result: bytes) -> bool:
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
