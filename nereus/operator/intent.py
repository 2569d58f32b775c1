"""What an operator mutation means: its target, whether it is destructive, its default key.

The default idempotency key is derived from the command's content — kind, shard, target,
fields, operator and reason — and not from the precondition digest, which the CLI works
out from the state at planning time. So re-running the same command after it applied
(the state, and with it the digest, has moved) still finds the first result instead of
acting twice. An explicit precondition digest is part of the content: it is what the
operator typed.

A STALE result changed nothing — the target had moved — so it must not pin the command
to that answer forever: when the key's result is STALE, the next key is derived from the
same content *after* that result's position, and so on. Re-running after a STALE tries
again (against the state as it is now). So does re-running a command whose change is no
longer in place (``lane close``, ``lane open``, ``lane close``: the second close is a new
request, found by the chaos runs; ``nereus.operator.plan``). Re-running after anything
else — the change still in place, or nothing left to do — finds the first result.
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
