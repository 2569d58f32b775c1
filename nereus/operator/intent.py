"""What an operator mutation means: its target, whether it is destructive, its default key.

The default idempotency key is derived from the content — kind, shard, target, fields,
operator, reason (and a precondition digest only when the operator typed one) — not from
the digest worked out at planning time, so re-running a command that applied still finds
its first result instead of acting twice. A result that changed nothing must not pin the
command for ever: when the key's result is STALE, or its change is no longer in place
(``lane close``, ``open``, ``close``: ``nereus.operator.plan``), the next key is derived from
the same content after that result's position, so the command acts again on the state as
it is now. Anything else finds the first result.
"""

from __future__ import annotations

import hashlib

import msgspec

from nereus.records.codec import OperatorMutation, encode, kind_of
from nereus.records.operator import (
    AttemptResolve,
    LaneConfig,
    LaneGate,
    LaneLimits,
    MessageBreak,
    ShardLimits,
    ShardPause,
    ShardResume,
    ShardRetention,
)
from nereus.records.vocabulary import Gate


def mutation_target(mutation: OperatorMutation) -> str:
    """A short human name for what the mutation acts on, e.g. ``lane payments``."""
    match mutation:
        case LaneGate(lane=lane) | LaneConfig(lane=lane) | LaneLimits(lane=lane):
            return f"lane {lane}"
        case AttemptResolve(attempt_id=attempt_id):
            return f"attempt {attempt_id}"
        case MessageBreak(delay_message_id=delay_message_id):
            return f"message {delay_message_id}"
        case ShardPause() | ShardResume() | ShardRetention() | ShardLimits():
            return "shard"
    raise AssertionError(f"no target for {mutation!r}")  # pragma: no cover


def is_destructive(mutation: OperatorMutation) -> bool:
    """True for mutations that stop delivery or settle something for good.

    Closing a lane and pausing a shard stop publishing; resolving an attempt and breaking
    a message cannot be undone. These ask for confirmation; opening a lane, changing its
    policy and resuming a shard do not.
    """
    match mutation:
        case LaneGate(gate=gate):
            return gate == Gate.CLOSED
        case AttemptResolve() | MessageBreak() | ShardPause():
            return True
    return False


def derive_idempotency_key(mutation: OperatorMutation, shard: str,
                           after: int | None = None) -> str:
    """The default idempotency key of ``mutation`` on ``shard`` (see the module docstring);
    ``after``: the position of a STALE result under the previous key."""
    content = msgspec.structs.replace(mutation, idempotency_key="")
    salt = b"" if after is None else b"\x00after=" + str(after).encode()
    digest = hashlib.sha256(shard.encode() + b"\x00" + encode(content) + salt).hexdigest()[:24]
    return f"auto-{kind_of(mutation).lower()}-{digest}"
