"""What Claim revalidates before it reserves a due timeline entry (seed 000 §2 step 2).

Before claiming, the planner reads the message again and checks the entry is exactly its
current work: the exact timeline key (lane, actionAt, id), the generation, the
semantic-work digest (``nereus.machine.tx.work_digest``, whose inputs are checked too), the
counters (the entry's retry is the message's; attempt number ``attempts + 1`` is free) and
an empty open obligation set. The message's runtime revision (``updated_position``) is
recorded in the claim for the hand-over to check again. Any mismatch: not claimed (apply
decides the message's fate; a stale entry is never admitted).
"""

from __future__ import annotations

from nereus.records import MessageState
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Message, WorkRef

MAX_ATTEMPT_NO = 1 << 32  # attempt numbers are u32 in the ledger's keys


def claim_refusal(store: ShardStore, key: bytes, message: Message,
                  ref: WorkRef) -> str | None:
    """Why timeline entry ``key`` (``ref``) is not ``message``'s current work, or None."""
    if message.state != MessageState.SCHEDULED:
        return f"the message is {message.state}, not SCHEDULED"
    mid = message.delay_message_id
    if key != keys.timeline_key(message.lane, message.action_at_ms, mid):
        return "the timeline entry is not the message's own (lane, actionAt)"
    if ref.generation != message.generation:
        return (f"the timeline entry is of generation {ref.generation}, the message of "
                f"{message.generation}")
    if ref.work_digest != message.work_digest:
        return "the timeline entry's semantic-work digest is not the message's work"
    if ref.retry != message.retries:
        return f"the timeline entry is retry {ref.retry}, the message has {message.retries}"
    if message.attempts + 1 >= MAX_ATTEMPT_NO:
        return f"the message's attempt counter is exhausted ({message.attempts})"
    if store.get(keys.msg_attempt_key(mid, message.attempts + 1)) is not None:
        return f"attempt number {message.attempts + 1} is already in the attempt ledger"
    if message.open_attempt_id is not None:
        return f"attempt {message.open_attempt_id} is open on the message"
    if message.attempts and next(store.keys_under(keys.obligation_prefix(mid)), None):
        return "an attempt of the message still has an open obligation"
    return None
