"""The gates of seed 000 section 1 as the scheduler checks them, one function each.

The planner (``planner.py``) runs them over every due timeline entry of a round; ``nereus
message explain`` (``explain.py``) runs the same functions over one message, so what it
says holds a message back is what the scheduler decides, not a second reading of the
rules. Each returns why it holds the message back, or None when it lets it through.
"""

from __future__ import annotations

from nereus.records import Gate
from nereus.state.values import Lane, Message, admission_expire_at_ms
from nereus.timespec import format_time_ms
from nereus.trusted_time import TrustedTime


def admission_gate(lane: Lane) -> str | None:
    """The lane's source-ordered admissionGate is OPEN."""
    return None if lane.gate == Gate.OPEN else "admissionGate CLOSED"


def readiness(ready: bool) -> str | None:
    """The lane's runtime readiness is READY (its publisher can send)."""
    return None if ready else "NOT READY"


def is_due(now: TrustedTime, action_at_ms: int) -> bool:
    """Trusted UTC proves actionAt has arrived. A round's timeline scan stops at the first
    entry past ``now.earliest_ms`` (``due_bound_ms``): the same rule."""
    return action_at_ms <= now.earliest_ms


def due_bound_ms(now: TrustedTime) -> int:
    """The first actionAt a round does not visit (``is_due`` is False from here on)."""
    return now.earliest_ms + 1


def not_due(now: TrustedTime, message: Message, lead_ms: int, lane: str) -> str | None:
    """actionAt has not arrived by Trusted UTC, or deliverAt less the destination's own
    hand-off lead has not (a lead the replicated policy allowed but the destination no
    longer gives: deliverAt still bounds the send)."""
    if not is_due(now, message.action_at_ms):
        return (f"not due: Trusted UTC earliest {format_time_ms(now.earliest_ms)} is before "
                f"actionAt {format_time_ms(message.action_at_ms)}")
    if now.earliest_ms < message.deliver_at_ms - lead_ms:
        return (f"deliverAt not reached: lane {lane}'s destination holds messages for "
                f"{lead_ms} ms")
    return None


def expired(now: TrustedTime, message: Message) -> str | None:
    """Trusted UTC proves expireAt has passed: the next round records it EXPIRED. A message
    whose admission already won on time is never expired (``admission_expire_at_ms``)."""
    expire_at_ms = admission_expire_at_ms(message)
    if now.has_expired(expire_at_ms):
        return (f"expired: Trusted UTC earliest {now.earliest_ms} is after expireAt "
                f"{expire_at_ms}")
    return None


def expiry_unproven(now: TrustedTime, message: Message) -> str | None:
    """Admission needs proof that expireAt has not passed (``latest <= expireAt``); inside
    the clock's uncertainty the message neither admits nor expires: it waits."""
    expire_at_ms = admission_expire_at_ms(message)
    if now.expiry_open(expire_at_ms):
        return None
    return (f"expiry not provable: Trusted UTC latest {now.latest_ms} is past expireAt "
            f"{expire_at_ms} while earliest {now.earliest_ms} is not")


def ordered_head(lane: Lane, message: Message,
                 open_keys: set[tuple[str, str]]) -> str | None:
    """On an ORDERED lane, a key with an open attempt or a live claim (``open_keys``) holds
    its other messages."""
    if not lane.ordered or message.key is None:
        return None
    if (lane.name, message.key) in open_keys:
        return f"ordered head: key {message.key!r} has an earlier unsettled message"
    return None


def key_queue(lane: Lane, message: Message, head: tuple[str, bool] | None) -> str | None:
    """On an ORDERED lane, only the first message of its key's queue (``head``: its id and
    whether it is in flight; apply keeps the queue) may be claimed: a retried or declined
    head keeps its place whatever its actionAt, and an attempt in flight holds the key."""
    if not lane.ordered or message.key is None or head is None:
        return None
    holder, in_flight = head
    if holder == message.delay_message_id:
        return None
    why = "has an attempt in flight" if in_flight else "is the key's head"
    return f"ordered head: key {message.key!r}: message {holder} {why}"


def capacity(lane: Lane, claims: int) -> str | None:
    """The lane's open attempts and live claims are below its capacity."""
    if lane.capacity is not None and lane.open_attempts + claims >= lane.capacity:
        return f"at capacity {lane.capacity}"
    return None


def quota(lane: Lane, quota_left: int | None) -> str | None:
    """The lane's admissions-per-second bucket has a token (None: no quota)."""
    if quota_left is not None and quota_left <= 0:
        return f"quota: {lane.quota} admissions per second"
    return None
