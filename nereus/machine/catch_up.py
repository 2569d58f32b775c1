"""Retention catch-up: what was written with no ``retain`` entry, because no retention or
window held then, gets one once one is given (``retention`` says what gets an entry when
written, and the SWEEP).

No record can scan a shard, so the record giving a window records a catch-up, the live
owner finds the items with its own cursor (``engine/shard/retention_backfill.py``) and
appends RETAIN_BACKFILL records naming at most 500; apply gives each item still eligible
its entry, or removes it at once when its time has passed, and skips the rest (naming twice
is a no-op). Catch-ups: a lane's first retention (``catch_up``); a retention given back
after 0 (``catch_up_kept``: ``kept_since``, ``later_catch_ups``); payload stages under a new
shard window (``stage_catch_up``); results and rejects under no shard window
(``catch_up_results``: ``ResultCatchUp``, ``SHARD_WINDOW_KINDS``). Ranges never meet and
exclude anything with its own entry, so nothing gets two. Results of lane records written
under no window are not caught up (which window held is not in the state; ``docs/rules.md`` §5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from nereus.machine.fencing import fenced
from nereus.machine.reasons import Reason
from nereus.machine.retention import (
    LANE_RECORDS,
    MAX_SWEEP_ENTRIES,
    drop_message,
    drop_unused_stage,
    retain_stage,
    stage_entry_at,
)
from nereus.machine.tx import Tx
from nereus.machine.verdict import Verdict, applied, rejected, stale
from nereus.records.codec import KINDS
from nereus.records.system import RetainBackfill, RouteIdentity, Sweep
from nereus.records.vocabulary import TERMINAL_STATES
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

MAX_REJECT_POSITION: Final = 2**64 - 1  # a reject key holds its position as u64

# the kinds whose result always has the shard's window, never a lane's (so none of their
# results has an entry of its own while that is 0): not a record a lane window may cover,
# nor a SWEEP or RETAIN_BACKFILL (a fixed window) or a ROUTE_IDENTITY (kept)
SHARD_WINDOW_KINDS: Final = frozenset(
    kind for cls, kind in KINDS.items()
    if cls not in LANE_RECORDS and cls not in (Sweep, RetainBackfill, RouteIdentity))


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
            drop_message(tx, delay_message_id, keep_result)
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
            removed += drop_unused_stage(tx, payload_id)
        else:
            tx.put(found[0], b"")
            entries += 1
    return (f"; {entries + removed} payload stages caught up ({entries} retained, {removed} "
            f"removed), {skipped} not eligible")


def _backfill_results(tx: Tx, result_keys: tuple[str, ...],
                      reject_positions: tuple[int, ...]) -> str:
    """The result part of a RETAIN_BACKFILL; what it did, for the result."""
    entries = removed = skipped = 0
    catch_ups = result_catch_ups(tx.get)
    named = [(keys.result_key(key), result_catch_up_of(tx.get, key, catch_ups=catch_ups))
             for key in result_keys]
    named += [(keys.reject_key(position),
               reject_catch_up_of(tx.get, position, catch_ups=catch_ups))
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


def result_catch_ups(get: Callable[[bytes], bytes | None]) -> tuple[ResultCatchUp, ...]:
    """The shard's result catch-ups (``ShardRetentionValue.result_catch_ups``); callers
    judging many items read them once and pass them on (``catch_ups``)."""
    raw = get(keys.META_SHARD_RETENTION)
    return () if raw is None else decode_value(raw, ShardRetentionValue).catch_ups()


def _covering(get: Callable[[bytes], bytes | None], catch_ups: tuple[ResultCatchUp, ...],
              position: int, kind: bytes, ident: str) -> tuple[bytes, int] | None:
    for catch_up in catch_ups:
        if catch_up.covers(position):
            key = keys.retain_key(catch_up.expire_at_ms, kind, ident)
            return None if get(key) is not None else (key, catch_up.expire_at_ms)
    return None


def result_catch_up_of(get: Callable[[bytes], bytes | None], dedup_key: str, *,
                       catch_ups: tuple[ResultCatchUp, ...] | None = None,
                       ) -> tuple[bytes, int] | None:
    """The catch-up entry (key, time) the result under ``dedup_key`` should get now (None:
    not eligible): it exists, its record's kind always has the shard's window
    (``SHARD_WINDOW_KINDS``), it was written in the range of one of the shard's result
    catch-ups (while the shard had no window, so it has no entry of its own, and its key
    was not reused meanwhile: nothing removed it), and has no entry of that catch-up yet.
    A result written under a window, with an entry of its own, is never named a second
    time: such an entry could outlive it and remove a later result reusing its key."""
    if catch_ups is None:
        catch_ups = result_catch_ups(get)
    if not catch_ups:
        return None
    held = get(keys.result_key(dedup_key))
    if held is None:
        return None
    result = decode_value(held, Result)
    if result.kind not in SHARD_WINDOW_KINDS:
        return None
    return _covering(get, catch_ups, result.position, keys.RETAIN_RESULT, dedup_key)


def reject_catch_up_of(get: Callable[[bytes], bytes | None], position: int, *,
                       catch_ups: tuple[ResultCatchUp, ...] | None = None,
                       ) -> tuple[bytes, int] | None:
    """The catch-up entry (key, time) the ``reject`` result at ``position`` should get now
    (None: not eligible): it exists, was written in the range of one of the shard's
    result catch-ups, and has no entry of that catch-up yet."""
    if catch_ups is None:
        catch_ups = result_catch_ups(get)
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
    at = stage_entry_at(stage.expires_at_ms, catch_up.window_ms)
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
