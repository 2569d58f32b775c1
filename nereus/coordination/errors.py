"""What a coordinator refuses, each error naming who is to blame.

One for one with Oxia's client exceptions (``oxia.ex``): ``UnexpectedVersionId``,
``KeyNotFound``, ``SessionNotFound`` (here ``SessionExpired``: the caller's session is
over, whichever way it ended). ``NotificationsLost`` is etcd's compacted watch: the store
no longer holds the changes a subscriber has not read. ``CoordinatorUnavailable`` is the
store not answering.
"""

from __future__ import annotations

from nereus.errors import NereusError, NotFound, ServiceUnreachable


class CoordinationError(NereusError):
    """Root of the coordinator's refusals."""


class UnexpectedVersionId(CoordinationError):
    """A conditional put or delete found another version than it expected (the caller
    raced someone: re-read and decide again)."""

    def __init__(self, key: str, expected_version_id: int, actual_version_id: int | None) -> None:
        actual = "no record" if actual_version_id is None else f"version {actual_version_id}"
        expected = ("no record" if expected_version_id < 0
                    else f"version {expected_version_id}")
        super().__init__(f"{key!r}: expected {expected}, found {actual}")
        self.key = key
        self.expected_version_id = expected_version_id
        self.actual_version_id = actual_version_id


class KeyNotFound(CoordinationError, NotFound):
    """``get`` of a key that has no record."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no record at {key!r}")
        self.key = key


class SessionExpired(CoordinationError):
    """The session is over (expired, closed, or unknown to the store): its ephemeral
    records are gone and it can make no more. Whatever it guarded is no longer held."""

    def __init__(self, session_id: int, why: str) -> None:
        super().__init__(f"session {session_id} is over: {why}")
        self.session_id = session_id


class NotificationsLost(CoordinationError):
    """The store dropped changes this subscription had not read yet: re-read the state
    (``range_scan``) and subscribe again."""

    def __init__(self, prefix: str, after: int, trimmed_through: int) -> None:
        super().__init__(f"notifications on {prefix!r}: changes after {after} were "
                         f"trimmed up to {trimmed_through} before they were read")
        self.prefix = prefix


class CoordinatorUnavailable(CoordinationError, ServiceUnreachable):
    """The coordinator's store does not answer (names the store and what failed)."""
