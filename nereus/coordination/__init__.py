"""Coordination: the ``Coordinator`` Protocol (shaped like Oxia's API) and its values.

Pure declarations: the backends live in ``nereus.adapters.backends.coordination``.
"""

from nereus.coordination.errors import (
    CoordinationError,
    CoordinatorUnavailable,
    KeyNotFound,
    NotificationsLost,
    SessionExpired,
    UnexpectedVersionId,
)
from nereus.coordination.protocol import Coordinator, Notifications, Session
from nereus.coordination.records import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    Notification,
    NotificationType,
    Record,
    Version,
    prefix_end,
    prefix_range,
)

__all__ = [
    "EXPECTED_RECORD_DOES_NOT_EXIST",
    "CoordinationError",
    "Coordinator",
    "CoordinatorUnavailable",
    "KeyNotFound",
    "Notification",
    "NotificationType",
    "Notifications",
    "NotificationsLost",
    "Record",
    "Session",
    "SessionExpired",
    "UnexpectedVersionId",
    "Version",
    "prefix_end",
    "prefix_range",
]
