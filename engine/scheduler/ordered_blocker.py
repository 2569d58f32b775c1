"""What holds an ORDERED lane's key for ``message explain``: a live claim or an open
attempt of another message of the key, or the key's head in its queue (``keys.order_key``:
the earliest deliverAt still SCHEDULED). Whether the key is held is the planner's own
``gates.ordered_head`` and ``gates.key_queue``; this module names the message that holds
it."""

from __future__ import annotations

from collections.abc import Mapping

from nereus.engine.scheduler import gates
from nereus.engine.scheduler.claims import Claim
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Lane, Message, decode_value


def key_head(store: ShardStore, lane: str, key: str) -> tuple[str, bool] | None:
    """The first message of ``key``'s queue on ORDERED ``lane`` (``keys.order_key``) and
    whether it is in flight; None when the key has no unfinished message."""
    prefix = keys.order_prefix(lane, key)
    first = next(store.keys_under(prefix), None)
    return None if first is None else keys.order_entry_message(first, prefix)


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
            held = gates.ordered_head(lane, message, {(lane.name, key)})
            return f"{held}: message {claim.delay_message_id} is claimed " \
                   f"(claim {claim.claim_id})"
    for attempt_id, (lane_name, held_key) in obligation_keys.items():
        if (lane_name, held_key) != (lane.name, key):
            continue
        raw = store.get(keys.attempt_key(attempt_id))
        if raw is None:
            continue
        attempt = decode_value(raw, Attempt)
        if attempt.delay_message_id == own:
            continue
        held = gates.ordered_head(lane, message, {(lane.name, key)})
        return f"{held}: message {attempt.delay_message_id}'s attempt {attempt_id} is " \
               f"{attempt.state}"
    return gates.key_queue(lane, message, key_head(store, lane.name, key))
