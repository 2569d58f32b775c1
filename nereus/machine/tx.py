"""One record's transaction: reads through the view, collects writes, keeps counters.

Handlers never touch keys or counters by hand: ``save_message`` writes the message and
moves the per-lane state counts in one place, so ``shard inspect`` can answer "messages
by state" from a few lane values instead of scanning every message.

Applying into an ``Overlay`` (the shard runner's batch), lane values and the ``meta``
counters are batch aggregates: ``put_lane`` and ``advance`` update the overlay's
``deferred`` typed values instead of writing, and the overlay encodes each once when the
batch is committed (``Overlay.finish``). Nearly every record moves its lane's counts and
every record moves the counters, so encoding them per record cost more than the rest
of the bookkeeping. Over any other view (offline tools, ``MemoryShard``) they are
written with the record, as before; the committed bytes are the same either way.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterator
from typing import Final

import msgspec

from nereus.machine.limits import Limits
from nereus.records.vocabulary import ADMITTED_STATES, TERMINAL_STATES, MessageState
from nereus.state import keys
from nereus.state.values import (
    MAX_BACKOFF_MS,
    Activation,
    Attempt,
    Lane,
    LaneLimit,
    Message,
    WorkRef,
    decode_int,
    decode_shared,
    decode_value,
    encode_int,
    encode_value,
)
from nereus.state.view import Overlay, StateView, Writes

_BLAKE2B_16: Final = hashlib.blake2b(digest_size=16)  # copied: cheaper than configuring one


def work_digest(delay_message_id: str, generation: int, action_at_ms: int, retry: int) -> str:
    """The semantic-work digest of one timeline entry (what a claim must match)."""
    text = f"{delay_message_id}\x00{generation}\x00PUBLISH\x00{action_at_ms}\x00{retry}"
    digest = _BLAKE2B_16.copy()
    digest.update(text.encode())
    return digest.hexdigest()


def quota_tokens_milli(lane: Lane, at_ms: int) -> tuple[int, int]:
    """The lane's token bucket refilled to broker time ``at_ms``: (milli-tokens, as of ms).

    ``quota`` tokens a second, at most ``quota`` of them (one second of burst); a bucket
    never used is full. Integers only, and every input is replicated (the lane value and
    the record's broker time), so replay decides exactly as the live shard did.
    """
    assert lane.quota is not None
    cap = lane.quota * 1_000
    if lane.quota_at_ms is None:
        return cap, at_ms
    elapsed = max(at_ms - lane.quota_at_ms, 0)
    return min(cap, lane.quota_tokens_milli + elapsed * lane.quota), max(at_ms, lane.quota_at_ms)


def _order_entry(message: Message) -> bytes | None:
    """Where a keyed message sits in its key's queue while unfinished (None: nowhere)."""
    if message.key is None or message.state in TERMINAL_STATES:
        return None
    return keys.order_key(message.lane, message.key, message.delay_message_id,
                          in_flight=message.state in ADMITTED_STATES,
                          deliver_at_ms=message.deliver_at_ms,
                          created_position=message.created_position)


def retry_backoff_ms(base_ms: int, retries: int) -> int:
    """Exponential backoff for the ``retries``-th retriable failure, capped."""
    return min(base_ms << max(retries - 1, 0), MAX_BACKOFF_MS) if base_ms else 0


class Tx:
    """Reads and pending writes of one record's application."""

    __slots__ = ("_deferred", "_message", "_message_raw", "_scanned", "_view", "_view_get",
                 "broker_ms", "limits", "position", "writes")

    def __init__(self, view: StateView, *, position: int, broker_ms: int, limits: Limits) -> None:
        self._view = view
        self._view_get = view.get  # bound once: every record reads through it
        self.position = position
        self.broker_ms = broker_ms
        self.limits = limits
        self.writes: Writes = {}
        self._deferred: dict[bytes, Lane | int] | None = None
        self._scanned: set[bytes] | None = None
        # the message value last read or saved, with the bytes it is (an outcome reads its
        # message again after saving it: its lane's dedup window)
        self._message_raw: bytes | None = None
        self._message: Message | None = None
        if isinstance(view, Overlay):
            self._deferred, self._scanned = view.deferred, view.scanned

    # raw access -------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        writes = self.writes
        if key in writes:
            return writes[key]
        return self._view_get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.writes[key] = value

    def delete(self, key: bytes) -> None:
        self.writes[key] = None

    def keys_under(self, prefix: bytes) -> Iterator[bytes]:
        """The keys under ``prefix`` as this record sees the state (its own writes over the
        view's), in key order."""
        mine = sorted(key for key, value in self.writes.items()
                      if value is not None and key.startswith(prefix))
        last = None
        for key in heapq.merge(self._view.keys_under(prefix), mine):
            if key != last and self.get(key) is not None:
                yield key
            last = key

    # typed access -----------------------------------------------------------------
    def message(self, delay_message_id: str) -> Message | None:
        raw = self.get(keys.msg_key(delay_message_id))
        if raw is None:
            return None
        if raw is self._message_raw:  # these very bytes: the same value, decoded already
            return self._message
        message: Message = decode_value(raw, Message)
        self._message_raw, self._message = raw, message
        return message

    def attempt(self, attempt_id: str) -> Attempt | None:
        raw = self.get(keys.attempt_key(attempt_id))
        return None if raw is None else decode_value(raw, Attempt)

    def put_attempt(self, attempt: Attempt) -> None:
        self.put(keys.attempt_key(attempt.attempt_id), encode_value(attempt))

    def lane(self, name: str) -> Lane:
        return self._lane_at(keys.lane_key(name), name)

    def put_lane(self, lane: Lane) -> None:
        self._put_lane_at(keys.lane_key(lane.name), lane)

    def lane_limits(self, name: str) -> LaneLimit | None:
        """The lane's limits on new work (None: it never had any)."""
        raw = self.get(keys.lane_limits_key(name))
        return None if raw is None else decode_shared(raw, LaneLimit)

    def _lane_at(self, key: bytes, name: str) -> Lane:
        if self._deferred is not None:
            pending = self._deferred.get(key)
            if isinstance(pending, Lane):
                return pending
        raw = self.get(key)
        return Lane(name=name) if raw is None else decode_value(raw, Lane)

    def _put_lane_at(self, key: bytes, lane: Lane) -> None:
        if self._deferred is None:
            self.put(key, encode_value(lane))
        else:
            self._deferred[key] = lane

    def advance(self) -> None:
        """Count this record as applied and move the applied position to it."""
        deferred = self._deferred
        if deferred is None:
            raw = self.get(keys.META_RECORDS)
            count = 0 if raw is None else decode_int(raw)
            self.put(keys.META_RECORDS, encode_int(count + 1))
            self.put(keys.META_APPLIED, encode_int(self.position))
            return
        pending = deferred.get(keys.META_RECORDS)
        if isinstance(pending, int):
            count = pending
        else:
            raw = self.get(keys.META_RECORDS)
            count = 0 if raw is None else decode_int(raw)
        deferred[keys.META_RECORDS] = count + 1
        deferred[keys.META_APPLIED] = self.position

    def activation(self) -> Activation | None:
        raw = self.get(keys.META_ACTIVATION)
        return None if raw is None else decode_shared(raw, Activation)

    def paused(self) -> bool:
        return self.get(keys.META_PAUSED) is not None

    # messages and the timeline ----------------------------------------------------
    def save_message(self, old: Message | None, new: Message, key: bytes | None = None) -> None:
        """Write ``new`` and move the lane's per-state counts from ``old``'s state.

        ``key`` is ``new``'s ``msg_key`` when the caller already has it (SCHEDULE does).
        """
        lane: Lane | None = None
        if old is None or old.state != new.state:
            lane_key = keys.lane_key(new.lane)
            lane = self._lane_at(lane_key, new.lane)
            counts = lane.counts.copy()
            if old is not None:
                remaining = counts.get(old.state, 0) - 1
                if remaining:
                    counts[old.state] = remaining
                else:
                    counts.pop(old.state, None)
            counts[new.state] = counts.get(new.state, 0) + 1
            self._put_lane_at(lane_key, msgspec.structs.replace(lane, counts=counts))
            if new.state in TERMINAL_STATES:  # terminal states are final: this happens once
                self._retain_terminal(new)
        if new.key is not None:
            self._move_order_entry(old, new, lane)
        raw = self._message_raw = encode_value(new)
        self._message = new
        self.writes[key or keys.msg_key(new.delay_message_id)] = raw

    def _move_order_entry(self, old: Message | None, new: Message, lane: Lane | None) -> None:
        """Keep a keyed message's place in its ORDERED lane's key queue (``keys.order_key``):
        an entry while it is unfinished, ranked in flight or by deliverAt. A lane changes
        between ORDERED and not only while it has no unfinished message (ORDERING_IN_USE),
        so an unordered lane's messages never have entries."""
        if lane is None:
            lane = self._lane_at(keys.lane_key(new.lane), new.lane)
        if not lane.ordered:
            return
        before = None if old is None else _order_entry(old)
        after = _order_entry(new)
        if before == after:
            return
        if before is not None:
            self.writes[before] = None
        if after is not None:
            self.writes[after] = b""
            if self._scanned is not None:
                self._scanned.add(after)

    def order_head(self, lane: str, key: str) -> tuple[str, bool] | None:
        """The first message of ``key``'s queue on ORDERED ``lane`` and whether it is in
        flight; None if the key has no unfinished message."""
        prefix = keys.order_prefix(lane, key)
        first = next(self.keys_under(prefix), None)
        return None if first is None else keys.order_entry_message(first, prefix)

    def _retain_terminal(self, message: Message) -> None:
        """``message`` just ended: its ``retain`` ``m`` entry at broker time + its lane's
        retention, holding when its SCHEDULE's result may go (``nereus.machine.retention``)."""
        limits = self.lane_limits(message.lane)
        if limits is None or not isinstance(limits.retention_ms, int) or not limits.retention_ms:
            return
        window = limits.dedup_window_ms if isinstance(limits.dedup_window_ms, int) else 0
        keep_result = keys.u64(keys.expire_at(self.broker_ms, window)) if window else b""
        self.put(keys.retain_key(keys.expire_at(self.broker_ms, limits.retention_ms),
                                 keys.RETAIN_MESSAGE, message.delay_message_id), keep_result)

    def forget_message(self, message: Message) -> None:
        """Remove ``message`` (a retention sweep) and take it out of its lane's counts."""
        lane_key = keys.lane_key(message.lane)
        lane = self._lane_at(lane_key, message.lane)
        counts = lane.counts.copy()
        remaining = counts.get(message.state, 0) - 1
        if remaining > 0:
            counts[message.state] = remaining
        else:
            counts.pop(message.state, None)
        self._put_lane_at(lane_key, msgspec.structs.replace(lane, counts=counts))
        self.delete(keys.msg_key(message.delay_message_id))

    def put_timeline(self, message: Message) -> Message:
        """Put ``message`` on the timeline at its actionAt; returns it with its work digest."""
        digest = self.put_timeline_entry(message.lane, message.action_at_ms,
                                         message.delay_message_id, message.generation,
                                         message.retries)
        return msgspec.structs.replace(message, work_digest=digest)

    def put_timeline_entry(self, lane: str, action_at_ms: int, delay_message_id: str,
                           generation: int, retry: int) -> str:
        """Write one timeline entry; returns its work digest."""
        digest = work_digest(delay_message_id, generation, action_at_ms, retry)
        ref = WorkRef(generation, "PUBLISH", digest, retry)  # positional: see Message
        self.writes[keys.timeline_key(lane, action_at_ms, delay_message_id)] = encode_value(ref)
        return digest

    def drop_timeline(self, message: Message) -> Message:
        """Remove ``message``'s timeline entry, if it has one."""
        if message.work_digest is not None:
            self.delete(
                keys.timeline_key(message.lane, message.action_at_ms, message.delay_message_id)
            )
        return msgspec.structs.replace(message, work_digest=None)

    def move_state(self, message: Message, state: MessageState, **changes: object) -> Message:
        """A copy of ``message`` in ``state``, updated at this record's position."""
        return msgspec.structs.replace(
            message, state=state, updated_position=self.position, **changes
        )
