"""Reason codes of REJECTED, STALE and RECORDED results.

Stable strings: scripts match on them, ``shard log`` prints them, and they are part of
replicated state (so renaming one changes digests: it is a format change).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    # the bytes themselves
    BAD_MAGIC = "BAD_MAGIC"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    MALFORMED = "MALFORMED"
    INVALID_FIELD = "INVALID_FIELD"
    NON_CANONICAL = "NON_CANONICAL"
    DUPLICATE_CONFLICT = "DUPLICATE_CONFLICT"
    # client commands
    MESSAGE_EXISTS = "MESSAGE_EXISTS"
    MESSAGE_NOT_FOUND = "MESSAGE_NOT_FOUND"
    ALREADY_ADMITTED = "ALREADY_ADMITTED"
    MESSAGE_TERMINAL = "MESSAGE_TERMINAL"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    UNKNOWN_PAYLOAD = "UNKNOWN_PAYLOAD"
    PAYLOAD_EXISTS = "PAYLOAD_EXISTS"
    PAYLOAD_IN_USE = "PAYLOAD_IN_USE"  # a committed payload another message's SCHEDULE uses
    PAYLOAD_MISMATCH = "PAYLOAD_MISMATCH"
    RESERVATION_EXPIRED = "RESERVATION_EXPIRED"
    MAX_DELAY_EXCEEDED = "MAX_DELAY_EXCEEDED"  # deliverAt beyond the lane's max_delay
    LANE_FULL = "LANE_FULL"  # the lane holds max_pending unfinished messages
    # system mutations
    STALE_MESSAGE_STATE = "STALE_MESSAGE_STATE"
    STALE_GENERATION = "STALE_GENERATION"
    STALE_WORK = "STALE_WORK"
    ATTEMPT_OPEN = "ATTEMPT_OPEN"
    LANE_CLOSED = "LANE_CLOSED"
    LANE_AT_CAPACITY = "LANE_AT_CAPACITY"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"  # the lane's admissions-per-second bucket is empty
    SHARD_PAUSED = "SHARD_PAUSED"
    NOT_DUE = "NOT_DUE"
    ACTION_BEFORE_DELIVER = "ACTION_BEFORE_DELIVER"  # actionAt earlier than the lane's lead
    LEAD_IN_USE = "LEAD_IN_USE"  # lowering a handoff lead SCHEDULED messages may rely on
    ORDERING_IN_USE = "ORDERING_IN_USE"  # changing a lane's ordering under unfinished messages
    NOT_ORDERED_HEAD = "NOT_ORDERED_HEAD"  # an ORDERED lane's key has an earlier message
    EXPIRED = "EXPIRED"
    NOT_EXPIRED = "NOT_EXPIRED"
    TIME_EVIDENCE = "TIME_EVIDENCE"
    FENCED = "FENCED"
    ROUTE_MISMATCH = "ROUTE_MISMATCH"  # a ROUTE_IDENTITY of another route or partition count
    ATTEMPT_NOT_FOUND = "ATTEMPT_NOT_FOUND"
    LATE_OUTCOME = "LATE_OUTCOME"
    UNKNOWN_NOT_DOWNGRADED = "UNKNOWN_NOT_DOWNGRADED"
    # operator mutations
    MISSING_OPERATOR = "MISSING_OPERATOR"
    MISSING_REASON = "MISSING_REASON"
    MISSING_IDEMPOTENCY_KEY = "MISSING_IDEMPOTENCY_KEY"
    MISSING_EVIDENCE = "MISSING_EVIDENCE"
    PRECONDITION_STALE = "PRECONDITION_STALE"
    ATTEMPT_NOT_UNKNOWN = "ATTEMPT_NOT_UNKNOWN"
