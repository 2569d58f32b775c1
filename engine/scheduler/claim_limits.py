"""What a lane's limits leave a claim: the quota bucket's admissions left, and whether a
message's record fits its destination; with the publish template a claim prepares.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from nereus.adapters.backends.destination.protocol import record_size
from nereus.engine.scheduler.claims import Claim
from nereus.machine.tx import quota_tokens_milli
from nereus.publish import PublishTemplate
from nereus.state.values import Lane, Message
from nereus.trusted_time import TrustedTime


def quota_left(lane: Lane, now: TrustedTime, claims: Iterable[Claim],
               admitted: Collection[str]) -> int | None:
    """Admissions the lane's quota still allows now: the replicated bucket, refilled to
    now, less the claims not yet admitted (``admitted``: claim ids; None: no quota)."""
    if lane.quota is None:
        return None
    tokens, _ = quota_tokens_milli(lane, now.earliest_ms)
    return tokens // 1_000 - sum(1 for c in claims
                                 if c.lane == lane.name and c.claim_id not in admitted)


def record_refusal(message: Message, limit: int | None) -> str | None:
    """Why the message's inline payload is too large for its lane's destination (checked
    at Claim: ``_prepare``), or None. A large payload is checked once fetched."""
    if message.payload_ref is not None:
        return None
    return size_refusal(publish_template(message, message.payload), limit)


def size_refusal(template: PublishTemplate, limit: int | None) -> str | None:
    if limit is None or (weight := record_size(template)) <= limit:
        return None
    return (f"the record is {weight} bytes at the destination; lane {template.lane}'s "
            f"destination takes at most {limit}")


def publish_template(message: Message, payload: bytes) -> PublishTemplate:
    """The immutable prepared publish template of a claim (seed 000 section 2 step 5)."""
    return PublishTemplate(
        delay_message_id=message.delay_message_id, generation=message.generation,
        lane=message.lane, deliver_at_ms=message.deliver_at_ms,
        action_at_ms=message.action_at_ms, key=message.key, headers=message.headers,
        payload=payload,
    )
