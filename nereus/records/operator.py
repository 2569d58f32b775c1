"""Operator Mutations: what ``nereus`` appends on an operator's behalf.

Every one carries who (``operator``), why (``reason``) and an ``idempotency_key`` (the
deduplication key: re-running the same command is a no-op with the same result). They
decode with empty defaults so that a missing identity is a clear REJECTED result naming
the field, not an opaque decode error. ``precondition_digest`` is the digest of the
target state the operator saw; when given and no longer current, the mutation is STALE.

The engine writes some of them too (a lane's configured policy, the shard's limits and
dedup window). Those name the owner and fencing epoch that wrote them (``owner_id``,
``fencing_epoch``) and are fenced like any System Mutation: from an owner that is not the
live one, STALE ``FENCED``. An operator's own mutations leave both unset (not encoded).
"""

from __future__ import annotations

import msgspec

from nereus.records.limits import Limits
from nereus.records.vocabulary import Gate, Resolution


class _Operator(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind",
                forbid_unknown_fields=True):
    operator: str = ""
    reason: str = ""
    idempotency_key: str = ""
    precondition_digest: str | None = None
    # written by an engine: its owner id and fencing epoch (module docstring); UNSET for
    # an operator's own mutation, and then not encoded (older records keep their bytes)
    owner_id: str | msgspec.UnsetType = msgspec.UNSET
    fencing_epoch: int | msgspec.UnsetType = msgspec.UNSET


class LaneGate(_Operator, frozen=True, kw_only=True, tag="LANE_GATE"):
    """Open or close a lane's admissionGate (source-ordered with client commands)."""

    lane: str
    gate: Gate


class LaneConfig(_Operator, frozen=True, kw_only=True, tag="LANE_CONFIG"):
    """Change a lane's capacity, quota, retry policy or ordering; None keeps a value."""

    lane: str
    capacity: int | None = None  # max open attempts (PUBLISHING + UNKNOWN) in the lane
    quota: int | None = None  # max admissions per second (token bucket, 1 s of burst)
    retry_max: int | None = None  # attempts before a retriable failure becomes FAILED
    # attempts that never reached the destination (declined: LANE_UNAVAILABLE) before FAILED
    unavailable_max: int | None = None
    retry_backoff_ms: int | None = None  # base of the exponential backoff
    ordered: bool | None = None  # ORDERED lanes keep per-key order
    # how long before deliverAt the destination action may start because the destination
    # holds the message until deliverAt (a Pulsar deliver_at handoff); 0 for a plain publish.
    # Lowering it is refused while the lane has SCHEDULED messages that may rely on it.
    handoff_lead_ms: int | None = None


class LaneLimits(_Operator, frozen=True, kw_only=True, tag="LANE_LIMITS"):
    """Set a lane's limits on new work, both at once (0: no limit). A SCHEDULE or
    RESCHEDULE whose deliverAt lies more than ``max_delay_ms`` after its record's broker
    time is REJECTED ``MAX_DELAY_EXCEEDED``; a SCHEDULE into a lane holding
    ``max_pending`` unfinished messages (SCHEDULED, PUBLISHING, UNCERTAIN) is REJECTED
    ``LANE_FULL``. Work already accepted is never touched by those two; ``retention_ms``
    and ``dedup_window_ms`` apply to messages and results from the next one on."""

    lane: str
    max_delay_ms: int = 0
    max_pending: int = 0
    # how long a terminal message (with its attempts and payload stage) is kept, and how
    # long a result of one of the lane's records answers a retry (0: kept). UNSET: leave
    # as replicated; an UNSET field is not encoded, so records from before these existed
    # keep their canonical bytes.
    retention_ms: int | msgspec.UnsetType = msgspec.UNSET
    dedup_window_ms: int | msgspec.UnsetType = msgspec.UNSET
    # True (the engine sets it): if this record is the first to give the lane a retention,
    # the lane's messages that ended before it are caught up by RETAIN_BACKFILL records
    # (``nereus.machine.catch_up``). UNSET: not encoded, so older records keep their bytes.
    catch_up: bool | msgspec.UnsetType = msgspec.UNSET
    # True (the engine sets it): a record that sets the retention to 0 (kept) remembers
    # where, and one that gives a retention back after it was 0 catches up the lane's
    # messages that ended meanwhile, as ``catch_up`` does the first retention's. UNSET:
    # not encoded (older records keep their bytes, and their effect: none).
    catch_up_kept: bool | msgspec.UnsetType = msgspec.UNSET


class ShardRetention(_Operator, frozen=True, kw_only=True, tag="SHARD_RETENTION"):
    """Set the shard's own dedup window (``[routes.NAME] dedup_window``, replicated by the
    engine): results written from the next record on whose record has no lane window
    (barriers, checkpoint marks, operator mutations, payload stages, query barriers, a
    command naming no message or a lane with no replicated window) and ``reject``
    results go after it (0: kept for ever). A new kind: shards whose logs never carry
    one keep every such result, as before, and their digests."""

    dedup_window_ms: int
    # True (the engine sets it): when this record gives the shard a window it had not
    # (none before, or 0), the payload stages no message used from before it, which may
    # have no ``p`` entry, are caught up by RETAIN_BACKFILL records. UNSET: not encoded,
    # so older records keep their bytes (and their effect: none).
    catch_up: bool | msgspec.UnsetType = msgspec.UNSET
    # True (the engine sets it): when this record gives the shard a window it had not,
    # the ``reject`` results and the results of records that never have a lane window
    # written meanwhile (from the start, or from the record that made it 0), which have no
    # entry, are caught up by RETAIN_BACKFILL records too. UNSET: not encoded (older
    # records keep their bytes, and their effect: none).
    catch_up_results: bool | msgspec.UnsetType = msgspec.UNSET


class ShardLimits(_Operator, frozen=True, kw_only=True, tag="SHARD_LIMITS"):
    """Set the limits apply holds the shard's records to from the next record on
    (``[shard]`` in nereus.toml, replicated by the owner at activation and when the
    configuration changes). A new kind: a shard whose log never carried one applies
    ``DEFAULT_LIMITS``, whoever replays it."""

    limits: Limits


class AttemptResolve(_Operator, frozen=True, kw_only=True, tag="ATTEMPT_RESOLVE"):
    """Settle an UNKNOWN attempt with evidence the operator holds."""

    attempt_id: str
    resolution: Resolution
    evidence: str = ""
    # True when the CLI fetched the destination record the evidence names and its attempt
    # id and evidence MAC matched; False: the operator's word (recorded as unverified)
    verified: bool = False


class MessageBreak(_Operator, frozen=True, kw_only=True, tag="MESSAGE_BREAK"):
    """Take a scheduled message out of scheduling for good (state FAILED, BROKEN)."""

    delay_message_id: str


class ShardPause(_Operator, frozen=True, kw_only=True, tag="SHARD_PAUSE"):
    """Stop new Publish Admissions on this shard; commands are still applied."""


class ShardResume(_Operator, frozen=True, kw_only=True, tag="SHARD_RESUME"):
    """Allow Publish Admissions again."""
