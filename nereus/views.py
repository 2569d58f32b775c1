"""Read models over a shard's state: the typed documents ``message show``, ``message list``
and ``attempt list`` print, built the same way by the engine (admin socket) and offline tools.
Times are given both as ISO-8601 UTC and as epoch ms (``*_ms``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import msgspec

from nereus.errors import NotFound, UsageError
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Lane, Message, Obligation, decode_value
from nereus.timespec import format_time_ms


def _time(ms: int | None) -> str | None:
    return None if ms is None else format_time_ms(ms)


class LateOutcomeView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An outcome that arrived after its attempt was settled (kept, not applied)."""

    outcome: str
    disposition: str
    evidence: str
    position: int


class AttemptView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One publish attempt of a message, with its evidence."""

    attempt_id: str
    attempt_no: int
    delay_message_id: str
    lane: str
    state: str
    generation: int
    owner_id: str
    admitted_position: int
    admitted_at: str | None
    disposition: str
    evidence: str | None
    settled_position: int | None
    settled_by: str | None
    late_outcomes: list[LateOutcomeView]


class MessageView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One message as ``message list`` prints it."""

    delay_message_id: str
    shard: str
    lane: str
    state: str
    generation: int
    deliver_at: str | None
    deliver_at_ms: int
    action_at: str | None
    expire_at: str | None
    key: str | None
    headers: dict[str, str]
    payload_bytes: int
    retries: int
    open_attempt_id: str | None
    detail: str | None
    created_position: int
    updated_position: int


class MessageDetail(MessageView, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One message as ``message show`` prints it: its attempts, and whether the answer is
    conclusive (every queued command applied, or a query barrier applied first)."""

    attempts: list[AttemptView]
    applied_position: int | None
    log_end_position: int | None  # null when the shard's log did not answer in time
    barrier_position: int | None
    conclusive: bool


class MessageList(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``message list``: one page of messages, up to the limit asked for, in shard then id
    order; ``next_cursor`` (null: nothing more) is what ``--after`` takes for the next page.
    A page may be short, even empty, and still have a next cursor: one page examines at most
    ``limit + MESSAGE_PAGE_SKIPS`` messages per shard, however few match the filters."""

    messages: list[MessageView]
    next_cursor: str | None


def attempt_view(attempt: Attempt) -> AttemptView:
    return AttemptView(
        attempt_id=attempt.attempt_id, attempt_no=attempt.attempt_no,
        delay_message_id=attempt.delay_message_id, lane=attempt.lane,
        state=attempt.state.value, generation=attempt.generation, owner_id=attempt.owner_id,
        admitted_position=attempt.admitted_position,
        admitted_at=_time(attempt.admitted_broker_ms),
        disposition=attempt.disposition.value, evidence=attempt.evidence or None,
        settled_position=attempt.settled_position, settled_by=attempt.settled_by,
        late_outcomes=[LateOutcomeView(outcome=late.outcome, disposition=late.disposition,
                                       evidence=late.evidence, position=late.position)
                       for late in attempt.late_outcomes])


def message_attempts(store: ShardStore, delay_message_id: str) -> list[AttemptView]:
    out = []
    for _, attempt_id in store.scan_prefix(keys.msg_attempt_prefix(delay_message_id)):
        raw = store.get(keys.attempt_key(attempt_id.decode()))
        if raw is not None:
            out.append(attempt_view(decode_value(raw, Attempt)))
    return out


def message_view(message: Message, shard: str) -> MessageView:
    return MessageView(
        delay_message_id=message.delay_message_id, shard=shard, lane=message.lane,
        state=message.state.value, generation=message.generation,
        deliver_at=_time(message.deliver_at_ms), deliver_at_ms=message.deliver_at_ms,
        action_at=_time(message.action_at_ms), expire_at=_time(message.expire_at_ms),
        key=message.key, headers=dict(message.headers), payload_bytes=len(message.payload),
        retries=message.retries, open_attempt_id=message.open_attempt_id,
        detail=message.detail, created_position=message.created_position,
        updated_position=message.updated_position)


def message_detail(store: ShardStore, message: Message, shard: str, *,
                   applied_position: int | None, log_end_position: int | None,
                   barrier_position: int | None) -> MessageDetail:
    """``message_view`` with the message's attempts and how conclusive the answer is."""
    return MessageDetail(
        **msgspec.structs.asdict(message_view(message, shard)),
        attempts=message_attempts(store, message.delay_message_id),
        applied_position=applied_position, log_end_position=log_end_position,
        barrier_position=barrier_position,
        conclusive=barrier_position is not None or (
            applied_position is not None and log_end_position is not None
            and applied_position + 1 >= log_end_position))


def find_message(store: ShardStore, delay_message_id: str) -> Message | None:
    raw = store.get(keys.msg_key(delay_message_id))
    return None if raw is None else decode_value(raw, Message)


def message_not_found(delay_message_id: str, shard: str, applied_position: int | None,
                      log_end_position: int | None = None) -> NotFound:
    """The error for a message the shard's state does not hold, with where the state is
    in the log and the two reasons a message an operator expects can be missing."""
    where = f"applied up to position {applied_position}" + (
        "" if log_end_position is None else f", log end {log_end_position}")
    return NotFound(f"no message {delay_message_id} on shard {shard} ({where})",
                    hint="a REJECTED schedule leaves no message (`message schedule --wait` "
                         "shows its result), and an ended message is removed with its "
                         "attempts after its lane's retention (default 7d)")


def iter_messages(store: ShardStore, *, state: str | None = None,
                  lane: str | None = None) -> Iterator[Message]:
    """Every message of the shard, filtered: a full scan of the history, for offline tools
    only (``message list`` reads one bounded page: ``message_page``)."""
    for _, raw in store.scan_prefix(keys.MSG):
        message = decode_value(raw, Message)
        if state is not None and message.state != state:
            continue
        if lane is not None and message.lane != lane:
            continue
        yield message


# What one page of ``message list`` may examine per shard beyond its limit: messages the
# filters turn away. A page that runs out of it ends short, with a cursor to go on from.
MESSAGE_PAGE_SKIPS: Final = 10_000
_OPEN_STATES: Final = frozenset({"PUBLISHING", "UNCERTAIN"})


def encode_cursor(shard: str, after: str) -> str:
    """The ``next_cursor`` of a page: go on with ``shard`` after message id ``after``
    ("": from its first message). Opaque to callers (base64url of a JSON pair)."""
    return base64.urlsafe_b64encode(msgspec.json.encode([shard, after])).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[str, str]:
    """(shard, after) of a cursor ``encode_cursor`` made; UsageError for anything else."""
    try:
        shard, after = msgspec.json.decode(
            base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), type=tuple[str, str])
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise UsageError(f"--after {text!r} is not a cursor of `message list`",
                         hint="give the next_cursor a previous page printed") from None
    return shard, after


@dataclass(frozen=True, slots=True)
class ShardPage:
    """One shard's part of a page: the messages found, the id to go on after (None: the
    shard has no more), and how many index keys were examined."""

    messages: list[MessageView]
    resume_after: str | None
    examined: int


def _may_hold(store: ShardStore, state: str | None, lane: str | None) -> bool:
    """False when the lanes' counters (kept by ``apply``) say the shard holds no message
    of ``state`` in ``lane``: the page skips the shard without reading an index."""
    if lane is not None:
        raw = store.get(keys.lane_key(lane))
        if raw is None:
            return False
        lanes = [decode_value(raw, Lane)]
    elif state is None:
        return True
    else:
        lanes = [decode_value(raw, Lane) for _, raw in store.scan_prefix(keys.LANE)]
    if state is None:
        return any(lane_value.counts for lane_value in lanes)
    return any(lane_value.counts.get(state, 0) for lane_value in lanes)


def message_page(store: ShardStore, shard: str, *, state: str | None, lane: str | None,
                 limit: int, after: str | None, budget: int) -> ShardPage:
    """Up to ``limit`` messages of one shard after id ``after``, in id order, examining at
    most ``budget`` index keys: the messages themselves, or for PUBLISHING and UNCERTAIN
    the open obligations (keyed by message id first, so the order is the same), which are
    as many as the open attempts, not the history."""
    if not _may_hold(store, state, lane):
        return ShardPage([], None, 0)
    obligations = state in _OPEN_STATES
    index = keys.OBLIGATION if obligations else keys.MSG
    # the first key past every key of ``after``: ids never hold 0x00, and an obligation
    # key is id, 0x00, attempt id
    start = index + (after.encode() + (b"\x01" if obligations else b"\x00") if after else b"")
    found: list[MessageView] = []
    examined = 0
    last: str | None = None
    for key, raw in store.scan(start, keys.prefix_end(index)):
        if len(found) >= limit or examined >= budget:
            return ShardPage(found, last, examined)  # more keys follow: go on after last
        examined += 1
        message: Message | None
        if obligations:
            last = key[1:].partition(b"\x00")[0].decode()
            message = find_message(store, last)
        else:
            last = key[1:].decode()
            message = decode_value(raw, Message)
        if message is None or (state is not None and message.state != state) or (
                lane is not None and message.lane != lane):
            continue
        found.append(message_view(message, shard))
    return ShardPage(found, None, examined)


def open_attempts(store: ShardStore, *, state: str | None = None) -> Iterator[Attempt]:
    """Attempts with an open obligation (PUBLISHING or UNKNOWN), optionally one state."""
    for _, raw in store.scan_prefix(keys.OBLIGATION):
        obligation = decode_value(raw, Obligation)
        if state is not None and obligation.state != state:
            continue
        attempt_raw = store.get(keys.attempt_key(obligation.attempt_id))
        if attempt_raw is not None:
            yield decode_value(attempt_raw, Attempt)


def due_backlog(store: ShardStore, lane: str, earliest_ms: int, *, cap: int = 100_000,
                start: bytes | None = None) -> int:
    """Timeline entries of ``lane`` due at ``earliest_ms`` (counted up to ``cap``).

    ``start`` may skip a range known to hold no entries (the scheduler's floor).
    """
    prefix = keys.timeline_lane_prefix(lane)
    count = 0
    for _ in store.scan(max(start or prefix, prefix), prefix + keys.u64(earliest_ms + 1)):
        count += 1
        if count >= cap:
            break
    return count
