"""The closed vocabularies records and state use: message states, outcomes, gates.

They are ``StrEnum`` so they encode as their names, read well in ``shard log`` and
``shard dump`` output, and compare equal to the plain strings scripts see in ``--json``.
Adding a member is a format change (see ``nereus.records.codec.FORMAT_VERSION``).
"""

from __future__ import annotations

from enum import StrEnum


class MessageState(StrEnum):
    """Where a Delayed Message is in its lifecycle; the states shown everywhere."""

    SCHEDULED = "SCHEDULED"  # on the timeline, waiting to be due (also after a retry)
    PUBLISHING = "PUBLISHING"  # an admitted attempt is open; the producer may be running
    PUBLISHED = "PUBLISHED"  # destination evidence proves the publish
    CANCELLED = "CANCELLED"  # cancelled before any admission
    EXPIRED = "EXPIRED"  # expireAt closed new admission before it was published
    UNCERTAIN = "UNCERTAIN"  # an attempt's outcome is UNKNOWN; resolved by evidence only
    FAILED = "FAILED"  # permanent error, retries exhausted, or broken by an operator


TERMINAL_STATES = frozenset(
    {MessageState.PUBLISHED, MessageState.CANCELLED, MessageState.EXPIRED, MessageState.FAILED}
)
ADMITTED_STATES = frozenset({MessageState.PUBLISHING, MessageState.UNCERTAIN})
# a lane's pending work: not finished, whatever comes of it (max_pending counts these)
UNFINISHED_STATES = frozenset({MessageState.SCHEDULED, *ADMITTED_STATES})


class AttemptState(StrEnum):
    """The attempt ledger's view of one admitted publish attempt."""

    PUBLISHING = "PUBLISHING"
    PUBLISHED = "PUBLISHED"
    NOT_PUBLISHED = "NOT_PUBLISHED"
    UNKNOWN = "UNKNOWN"


OPEN_ATTEMPT_STATES = frozenset({AttemptState.PUBLISHING, AttemptState.UNKNOWN})


class Outcome(StrEnum):
    """The side-effect dimension of a publish outcome (seed 000, section 4)."""

    PUBLISHED = "PUBLISHED"
    NOT_PUBLISHED = "NOT_PUBLISHED"
    UNKNOWN = "UNKNOWN"


class Disposition(StrEnum):
    """The disposition dimension: what may happen next after NOT_PUBLISHED."""

    NONE = "NONE"
    RETRIABLE = "RETRIABLE"
    PERMANENT = "PERMANENT"
    LANE_UNAVAILABLE = "LANE_UNAVAILABLE"


class Gate(StrEnum):
    """A lane's source-ordered admissionGate."""

    OPEN = "OPEN"
    CLOSED = "CLOSED"


class ClaimDisposition(StrEnum):
    """Why a claim ended without an attempt, recorded through the log."""

    PERMANENT_ERROR = "PERMANENT_ERROR"  # proven permanent pre-send error
    EXPIRED = "EXPIRED"  # Trusted UTC proves expireAt has passed


class Resolution(StrEnum):
    """An operator's settlement of an UNKNOWN attempt."""

    PUBLISHED = "PUBLISHED"
    NOT_PUBLISHED = "NOT_PUBLISHED"


class ResultStatus(StrEnum):
    """The stable result every applied record leaves."""

    APPLIED = "APPLIED"
    REJECTED = "REJECTED"
    STALE = "STALE"  # a system mutation whose replay-stable precondition no longer holds
    RECORDED = "RECORDED"  # kept for the audit trail, changed nothing (late outcome)
