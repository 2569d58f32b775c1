"""What an operator mutation would change on one shard, in operator terms.

``describe_writes`` reads the writes a dry-applied mutation leaves (against the state it
met) and says which lanes change and how, how many messages move from which state to
which, which attempts settle, and whether the shard pauses or resumes. These values go
over the admin socket (``POST /v1/mutations/plan``) and into the CLI's mutation document,
so their fields are the JSON keys both print.
"""

from __future__ import annotations

from collections import Counter

import msgspec

from nereus.state import keys
from nereus.state.values import Attempt, Lane, Message, decode_value
from nereus.state.view import StateView

# a lane policy setting's value: a gate (str), a count or a duration (int), a flag (bool),
# or unset (None)
PolicyValue = str | int | bool | None


class PolicyChange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One lane policy setting, before and after."""

    before: PolicyValue = msgspec.field(name="from")
    after: PolicyValue = msgspec.field(name="to")


class LaneChange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A lane whose policy the mutation changes (only changed settings in ``changed``)."""

    lane: str
    changed: dict[str, PolicyChange]
    scheduled: int
    in_flight: int
    messages_by_state: dict[str, int]


class AttemptChange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An attempt the mutation settles or moves (states: ``None`` when absent)."""

    attempt_id: str
    delay_message_id: str
    before: str | None = msgspec.field(name="from")
    after: str | None = msgspec.field(name="to")


class Impact(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the mutation would change on one shard. ``message_transitions`` counts moves
    by ``FROM->TO`` (``NONE`` for a message that is not there); ``paused`` only when the
    mutation pauses (true) or resumes (false) the shard."""

    lanes: list[LaneChange]
    messages_changed: int
    message_transitions: dict[str, int]
    attempts: list[AttemptChange]
    paused: bool | msgspec.UnsetType = msgspec.UNSET


def describe_writes(view: StateView, writes: dict[bytes, bytes | None]) -> Impact:
    """What ``writes`` would change, in operator terms (lanes, messages, attempts, pause)."""
    lanes: list[LaneChange] = []
    transitions: Counter[str] = Counter()
    attempts: list[AttemptChange] = []
    paused: bool | msgspec.UnsetType = msgspec.UNSET
    for key in sorted(writes):
        new = writes[key]
        old = view.get(key)
        if key.startswith(keys.LANE):
            change = _lane_change(old, new)
            if change.changed:  # counts alone move with every message: not news here
                lanes.append(change)
        elif key.startswith(keys.MSG):
            before = None if old is None else decode_value(old, Message).state.value
            after = None if new is None else decode_value(new, Message).state.value
            if before != after:
                transitions[f"{before or 'NONE'}->{after or 'NONE'}"] += 1
        elif key.startswith(keys.ATTEMPT):
            attempts.append(_attempt_change(old, new))
        elif key == keys.META_PAUSED:
            paused = new is not None
    return Impact(lanes=lanes, messages_changed=sum(transitions.values()),
                  message_transitions=dict(sorted(transitions.items())), attempts=attempts,
                  paused=paused)


_POLICY = ("gate", "capacity", "quota", "retry_max", "retry_backoff_ms", "unavailable_max",
           "ordered", "handoff_lead_ms")


def _lane_change(old: bytes | None, new: bytes | None) -> LaneChange:
    after = decode_value(new, Lane) if new is not None else None
    lane = after or decode_value(old or b"", Lane)
    # a lane the shard has not seen yet has the default policy (gate OPEN)
    before = decode_value(old, Lane) if old is not None else Lane(name=lane.name)
    changed = {
        name: PolicyChange(before=_plain(getattr(before, name)),
                           after=_plain(getattr(after, name, None)))
        for name in _POLICY
        if getattr(before, name) != getattr(after, name, None)
    }
    return LaneChange(lane=lane.name, changed=changed,
                      scheduled=lane.counts.get("SCHEDULED", 0), in_flight=lane.open_attempts,
                      messages_by_state=dict(sorted(lane.counts.items())))


def _attempt_change(old: bytes | None, new: bytes | None) -> AttemptChange:
    before = decode_value(old, Attempt) if old is not None else None
    after = decode_value(new, Attempt) if new is not None else None
    attempt = after or before
    assert attempt is not None
    return AttemptChange(attempt_id=attempt.attempt_id,
                         delay_message_id=attempt.delay_message_id,
                         before=None if before is None else before.state.value,
                         after=None if after is None else after.state.value)


def _plain(value: object) -> PolicyValue:
    plain = getattr(value, "value", value)
    assert plain is None or isinstance(plain, str | int | bool), plain
    return plain
