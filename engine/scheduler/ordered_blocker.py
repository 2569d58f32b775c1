"""What holds an ORDERED lane's key for ``message explain``: a live claim or an open
attempt of another message of the key, or an earlier due message of it still SCHEDULED
(a round visits the key's head first). Whether the key is held is the planner's own
``gates.ordered_head``; this module names the message that holds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from nereus.engine.scheduler import gates
from nereus.engine.scheduler.claims import Claim
from nereus.records import MessageState
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Lane, Message, decode_value
from nereus.timespec import format_time_ms

EARLIER_SCAN_CAP: Final = 10_000  # timeline entries read before the message, at most


def ordered_blocker(store: ShardStore, lane: Lane, message: Message,
                    claims: Mapping[str, Claim],
                    obligation_keys: Mapping[str, tuple[str, str]]) -> str | None:
    """Why ``message``'s key is held on its ORDERED lane, naming the holder; None if not."""
    if not lane.ordered or message.key is None:
        return None
    key, own = message.key, message.delay_message_id
    for claim in claims.values():
        if claim.lane == lane.name and claim.template.key == key \
                and claim.delay_message_id != own:
            held = gates.ordered_head(lane, message, {(lane.name, key)}, set())
            return f"{held}: message {claim.delay_message_id} is claimed " \
                   f"(attempt {claim.attempt_id})"
    for attempt_id, (lane_name, held_key) in obligation_keys.items():
        if (lane_name, held_key) != (lane.name, key):
            continue
        raw = store.get(keys.attempt_key(attempt_id))
        if raw is None:
            continue
        attempt = decode_value(raw, Attempt)
        if attempt.delay_message_id == own:
            continue
        held = gates.ordered_head(lane, message, {(lane.name, key)}, set())
        return f"{held}: message {attempt.delay_message_id}'s attempt {attempt_id} is " \
               f"{attempt.state}"
    return _earlier_scheduled(store, lane, message)


def _earlier_scheduled(store: ShardStore, lane: Lane, message: Message) -> str | None:
    end = keys.timeline_key(lane.name, message.action_at_ms, message.delay_message_id)
    for seen, (entry, _) in enumerate(store.scan(keys.timeline_lane_prefix(lane.name), end)):
        if seen >= EARLIER_SCAN_CAP:
            return None
        _, action_at_ms, other_id = keys.split_timeline_key(entry)
        raw = store.get(keys.msg_key(other_id))
        if raw is None:
            continue
        other = decode_value(raw, Message)
        if other.key == message.key and other.state == MessageState.SCHEDULED:
            held = gates.ordered_head(lane, message, set(), {message.key or ""})
            return f"{held}: message {other_id} (actionAt {format_time_ms(action_at_ms)}) " \
                   "is the key's head"
    return None
