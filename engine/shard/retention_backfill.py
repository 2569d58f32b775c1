"""When a shard loop appends a RETAIN_BACKFILL (retention catch-up, ``nereus.machine.catch_up``).

A catch-up recorded by apply (a lane's first retention or one given back after 0; a shard
window given: stages, results and rejects) names items with no ``retain`` entry that no
single record could find. The live owner walks the ``msg``, then ``result``, ``reject`` and
``payload`` families with a cursor of its own (``scan_keys`` keys a look, about once a
second) and appends one RETAIN_BACKFILL naming the eligible items met
(``MAX_SWEEP_ENTRIES`` at most), looking again once it is applied (or after ``give_up_s``,
from where that record's ids were found). The cursor is local state (``sched``, outside the
digest), kept across restarts and started over by a new catch-up. Apply decides from the
record and the state alone, so a lost or stale cursor costs a look, never a different digest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

import msgspec

from nereus.adapters.time_source import Clock
from nereus.engine.shard.awaited_record import AwaitedRecord
from nereus.engine.shard.outbox import Outbox
from nereus.machine.catch_up import (
    SHARD_WINDOW_KINDS,
    catch_up_of,
    reject_catch_up_of,
    result_catch_up_of,
    result_catch_ups,
    stage_catch_up_of,
)
from nereus.machine.retention import MAX_SWEEP_ENTRIES
from nereus.records import RetainBackfill, encode
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import (
    LaneLimit,
    Message,
    PayloadStage,
    Result,
    ResultCatchUp,
    ShardRetentionValue,
    StageCatchUp,
    decode_value,
)

CURSOR_KEY = keys.SCHED + b"backfill"
STAGES: Final = "*payload-stages"  # the shard's stage catch-up in ``Cursor.covered``
RESULTS: Final = "*results"  # the shard's latest result catch-up in ``Cursor.covered``


class Cursor(msgspec.Struct, frozen=True, kw_only=True):
    """Where the owner's catch-up scan is (``sched/backfill``): the catch-ups it covers
    (lane -> before position; ``STAGES``: the shard's stage catch-up; ``RESULTS``: its
    latest result catch-up) and the last key it looked at, in the ``msg``, ``result``,
    ``reject`` and ``payload`` families in that (key) order (None: finished)."""

    covered: dict[str, int]
    after: bytes | None


class Found(NamedTuple):
    """What one look found: eligible message ids, payload ids, result dedup keys and
    reject positions, and the cursor."""

    messages: list[str]
    stages: list[str]
    results: list[str]
    rejects: list[int]
    cursor: Cursor

    def named(self) -> int:
        return len(self.messages) + len(self.stages) + len(self.results) + len(self.rejects)


class BackfillTrigger:
    """One shard loop's retention catch-up (module docstring)."""

    def __init__(self, store: ShardStore, outbox: Outbox, *, time: Clock, owner_id: str,
                 new_id: Callable[[], str], every_s: float = 1.0, give_up_s: float = 60.0,
                 scan_keys: int = 5_000) -> None:
        self._store = store
        self._outbox = outbox
        self._time = time
        self._owner_id = owner_id
        self._new_id = new_id
        self._every_s = every_s
        self._scan_keys = scan_keys
        self._next_look = 0.0
        # a record on its way, with the cursor to look from again if it is lost
        self._on_way: AwaitedRecord[Cursor] = AwaitedRecord(store, give_up_s)
        self.backfills = 0  # RETAIN_BACKFILL records appended (for tests and benchmarks)

    def wanted(self) -> dict[str, int]:
        """Every lane with a catch-up in the replicated limits: lane -> the latest one's
        before position (a new one changes it, and the scan starts over); ``STAGES`` ->
        the shard's stage catch-up's, and ``RESULTS`` -> its latest result catch-up's,
        when it has them."""
        found: dict[str, int] = {}
        for _, raw in self._store.scan_prefix(keys.META_LANE_LIMITS):
            limits = decode_value(raw, LaneLimit)
            if catch_ups := limits.catch_ups():
                found[limits.lane] = max(c.before_position for c in catch_ups)
        held = self._store.get(keys.META_SHARD_RETENTION)
        if held is not None:
            shard = decode_value(held, ShardRetentionValue)
            if isinstance(shard.stage_catch_up, StageCatchUp):
                found[STAGES] = shard.stage_catch_up.before_position
            if results := shard.catch_ups():
                found[RESULTS] = results[-1].before_position
        return found

    def cursor(self) -> Cursor | None:
        raw = self._store.get(CURSOR_KEY)
        return None if raw is None else msgspec.msgpack.decode(raw, type=Cursor)

    def _save(self, cursor: Cursor) -> None:
        self._store.write({CURSOR_KEY: msgspec.msgpack.encode(cursor)}, sync=False)

    def step(self, cursor: Cursor) -> Found:
        """Look at up to ``scan_keys`` keys after the cursor — the ``msg`` family when a
        lane has a catch-up, the ``result`` and ``reject`` families when the shard has a
        result catch-up, the ``payload`` family when it has a stage catch-up — and return
        the eligible ones met (at most ``MAX_SWEEP_ENTRIES`` in all) and the cursor after
        them."""
        found = Found([], [], [], [], cursor)
        after = cursor.after
        start = keys.MSG if after is None else after + b"\x00"
        lanes = cursor.covered.keys() - {STAGES, RESULTS}
        results = RESULTS in cursor.covered
        # read once a look: judging each result or reject would read it again
        catch_ups = result_catch_ups(self._store.get) if results else ()
        families = [family for family, wanted in ((keys.MSG, bool(lanes)),
                                                  (keys.RESULT, results),
                                                  (keys.REJECT, results),
                                                  (keys.PAYLOAD, STAGES in cursor.covered))
                    if wanted and keys.prefix_end(family) > start]
        looked = 0
        for family in families:
            for key, raw in self._store.scan(max(start, family), keys.prefix_end(family)):
                looked += 1
                after = key
                self._judge(family, key, raw, lanes, catch_ups, found)
                if found.named() >= MAX_SWEEP_ENTRIES or looked >= self._scan_keys:
                    return found._replace(cursor=Cursor(covered=cursor.covered, after=after))
        return found._replace(cursor=Cursor(covered=cursor.covered, after=None))  # finished

    def _judge(self, family: bytes, key: bytes, raw: bytes, lanes: set[str],
               catch_ups: tuple[ResultCatchUp, ...], found: Found) -> None:
        """Add the item at ``key`` to ``found`` if a catch-up makes it eligible
        (``catch_ups``: the shard's result catch-ups)."""
        get = self._store.get
        if family == keys.MSG:
            message = decode_value(raw, Message)
            if message.lane in lanes and catch_up_of(get, message) is not None:
                found.messages.append(message.delay_message_id)
        elif family == keys.RESULT:
            # most results are of lane records: their kind settles them without a read
            if decode_value(raw, Result).kind in SHARD_WINDOW_KINDS:
                dedup_key = keys.dedup_key_of(key)
                if result_catch_up_of(get, dedup_key, catch_ups=catch_ups) is not None:
                    found.results.append(dedup_key)
        elif family == keys.REJECT:
            position = keys.reject_position_of(key)
            if reject_catch_up_of(get, position, catch_ups=catch_ups) is not None:
                found.rejects.append(position)
        else:
            payload_id = decode_value(raw, PayloadStage).payload_id
            if stage_catch_up_of(get, payload_id) is not None:
                found.stages.append(payload_id)

    def maybe_backfill(self, epoch: int) -> bool:
        """Look once more if it is time and nothing is on its way; True when it appended
        a record or has more to look at."""
        mono = self._time.monotonic()
        if mono < self._next_look:
            return False
        self._next_look = mono + self._every_s
        on_way, lost = self._on_way.settle(mono)
        if on_way:
            return False
        if lost is not None:
            self._save(lost)  # look at its messages again
        wanted = self.wanted()
        if not wanted:
            return False
        cursor = self.cursor()
        if cursor is None or cursor.covered != wanted:
            cursor = Cursor(covered=wanted, after=keys.MSG)  # a new catch-up: from the start
        elif cursor.after is None:
            return False  # finished
        found = self.step(cursor)
        self._save(found.cursor)
        if found.named():
            mutation_id = self._new_id()
            self._outbox.add([encode(RetainBackfill(
                mutation_id=mutation_id, owner_id=self._owner_id, fencing_epoch=epoch,
                delay_message_ids=tuple(found.messages),
                payload_ids=tuple(found.stages) if found.stages else msgspec.UNSET,
                result_keys=tuple(found.results) if found.results else msgspec.UNSET,
                reject_positions=tuple(found.rejects) if found.rejects else msgspec.UNSET))])
            self._on_way.appended(mutation_id, mono, cursor)
            self.backfills += 1
            return True
        return found.cursor.after is not None
