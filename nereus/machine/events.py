"""What applying one record did, as typed events the shell acts on (``Applied.events``):
the writes' events (``nereus.state.events``: work scheduled, an obligation opened or
closed) and the record's (an admission won or refused, an attempt settled, a control
record that may change the owner's gate). Nothing outside ``nereus.state`` reads keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from nereus.records.client import Schedule
from nereus.records.operator import AttemptResolve
from nereus.records.system import PublishAdmission, PublishBatch, PublishOutcome
from nereus.records.vocabulary import ResultStatus
from nereus.state.events import ObligationClosed, ObligationOpened, WorkScheduled, write_events
from nereus.state.values import Result

if TYPE_CHECKING:
    from nereus.machine.apply import Applied


class Admitted(msgspec.Struct, frozen=True):
    """A PUBLISH_ADMISSION was APPLIED: its owner may publish the attempt now."""

    admission: PublishAdmission


class ClaimRevoked(msgspec.Struct, frozen=True):
    """A PUBLISH_ADMISSION was not applied (STALE, REJECTED): its claim is over; ``result``
    says why (``TIME_EVIDENCE``: the owner's clock could not show the message due)."""

    admission: PublishAdmission
    result: Result


class AttemptSettled(msgspec.Struct, frozen=True):
    """An attempt's outcome (published, failed) or an operator's resolve was applied."""

    attempt_id: str


class ControlApplied(msgspec.Struct, frozen=True):
    """Every other record (an activation barrier, an operator's pause, ...): the owner's
    gate may have changed."""


RecordEvent = Admitted | ClaimRevoked | AttemptSettled | ControlApplied
Event = WorkScheduled | ObligationOpened | ObligationClosed | RecordEvent

__all__ = ["Admitted", "AttemptSettled", "ClaimRevoked", "ControlApplied", "Event",
           "ObligationClosed", "ObligationOpened", "RecordEvent", "WorkScheduled", "events_of"]


def events_of(applied: Applied) -> list[Event]:
    """The writes' events, then the record's (none for a re-delivery, a bad record or a
    SCHEDULE, whose only event is its work scheduled); a PUBLISH_BATCH's are its members',
    member by member (a rejected batch has none)."""
    if applied.members:
        return [event for member in applied.members for event in events_of(member)]
    found: list[Event] = list(write_events(applied.writes))
    record = applied.record
    # exact types, not isinstance: this runs for every applied record, and isinstance
    # against a msgspec Struct class that does not match costs ~70 ns
    if applied.duplicate or record is None or type(record) is Schedule \
            or type(record) is PublishBatch:
        return found
    if type(record) is PublishAdmission:
        found.append(Admitted(record) if applied.result.status is ResultStatus.APPLIED
                     else ClaimRevoked(record, applied.result))
    elif type(record) is PublishOutcome or type(record) is AttemptResolve:
        found.append(AttemptSettled(record.attempt_id))
    else:
        found.append(ControlApplied())
    return found
