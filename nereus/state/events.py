"""What one record's writes did, as typed events: the shell learns from these what
happened (work scheduled, an obligation opened or closed) instead of reading the key
schema (``keys.py``) itself. ``write_events`` is the only reader of write keys' prefixes
outside the store and the digest."""

from __future__ import annotations

from typing import Final

import msgspec

from nereus.state import keys
from nereus.state.values import Obligation, decode_value
from nereus.state.view import Writes

_TIMELINE: Final = keys.TIMELINE[0]
_OBLIGATION: Final = keys.OBLIGATION[0]


class WorkScheduled(msgspec.Struct, frozen=True):
    """Work was put on the timeline (a SCHEDULE, a reschedule, a retry after backoff):
    ``timeline_key`` is where a scan for due work finds it."""

    timeline_key: bytes


class ObligationOpened(msgspec.Struct, frozen=True):
    """An attempt was admitted and must be settled; with a key, it holds its ordered head."""

    attempt_id: str
    obligation: Obligation


class ObligationClosed(msgspec.Struct, frozen=True):
    """An attempt's obligation was settled (its outcome, an operator's resolve)."""

    attempt_id: str


WriteEvent = WorkScheduled | ObligationOpened | ObligationClosed


def write_events(writes: Writes) -> list[WriteEvent]:
    """The events in ``writes``, in their order (one pass; runs for every applied record)."""
    found: list[WriteEvent] = []
    for key, value in writes.items():
        first = key[0]
        if first == _TIMELINE:
            if value is not None:
                found.append(WorkScheduled(key))
        elif first == _OBLIGATION:
            attempt_id = key[1:].split(b"\x00", 1)[1].decode()
            found.append(ObligationClosed(attempt_id) if value is None else
                         ObligationOpened(attempt_id, decode_value(value, Obligation)))
    return found
