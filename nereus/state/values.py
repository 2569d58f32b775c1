"""The values stored under the key schema of ``keys.py``.

Frozen msgspec Structs, encoded as canonical MessagePack (sorted maps) so that the same
state always has the same bytes and the state digest is reproducible. Every value here
is decodable by ``nereus shard dump`` without the engine. Updates make a new value with
``msgspec.structs.replace``; nothing is mutated in place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec

from nereus.records.vocabulary import AttemptState, Disposition, Gate, MessageState, ResultStatus

DEFAULT_RETRY_MAX: Final = 5
DEFAULT_UNAVAILABLE_MAX: Final = 20
DEFAULT_RETRY_BACKOFF_MS: Final = 1_000
MAX_BACKOFF_MS: Final = 3_600_000


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """Which shard this database belongs to (``meta/identity``)."""

    route: str
    partition: int
    schema_version: int


class Message(msgspec.Struct, frozen=True):
    """One managed Delayed Message (``msg/<id>``).

    Not ``kw_only``, like ``WorkRef`` and ``Result``: apply builds one of each per
    SCHEDULE and msgspec matches keyword arguments at about 35 ns each, so the SCHEDULE
    path builds them positionally (0.13 us against 0.74 for this one). Everywhere else
    constructs them by keyword; ``tests/unit/test_values.py`` pins the field order.
    """

    delay_message_id: str
    lane: str
    state: MessageState
    generation: int
    deliver_at_ms: int
    action_at_ms: int
    expire_at_ms: int | None
    key: str | None
    headers: dict[str, str]
    payload: bytes
    payload_ref: str | None
    work_digest: str | None  # the current timeline work; None when not on the timeline
    retries: int  # retriable NOT_PUBLISHED outcomes so far (backoff and retry limit)
    attempts: int  # admitted attempts so far
    open_attempt_id: str | None
    schedule_command_id: str
    created_position: int
    updated_position: int
    detail: str | None = None  # why it ended, when it ended badly
    unavailable: int = 0  # attempts that never reached the destination (LANE_UNAVAILABLE)


def admission_expire_at_ms(message: Message) -> int | None:
    """The expireAt that still closes this message's admission: its own until an admission
    of it has won, then none. expireAt closes new admissions only (seed 000 §4): an
    admission that won on time is not rewritten by what comes after it (a decline, a
    retriable failure), so its retries are admitted after expireAt too and the message is
    never EXPIRED (``retry_max`` and ``unavailable_max`` still bound them)."""
    return message.expire_at_ms if message.attempts == 0 else None


class WorkRef(msgspec.Struct, frozen=True):
    """A replayable timeline entry: the work a scheduler may claim when it is due."""

    generation: int
    work_kind: str  # PUBLISH
    work_digest: str
    retry: int


class Result(msgspec.Struct, frozen=True):
    """The stable result a record left (``result/<dedup key>`` or ``reject/<position>``)."""

    status: ResultStatus
    kind: str
    position: int
    record_sha256: str
    reason: str | None = None
    detail: str | None = None
    delay_message_id: str | None = None
    generation: int | None = None
    attempt_id: str | None = None
    at_byte: int | None = None
    field: str | None = None


class LateOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """An outcome that arrived after its attempt was settled: kept, not applied."""

    outcome: str
    disposition: str
    evidence: str
    position: int


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """One admitted publish attempt in the attempt ledger (``attempt/<id>``)."""

    attempt_id: str
    delay_message_id: str
    generation: int
    attempt_no: int
    lane: str
    state: AttemptState
    claim_id: str
    owner_id: str
    fencing_epoch: int
    prepared_digest: str
    admitted_position: int
    admitted_broker_ms: int
    disposition: Disposition = Disposition.NONE
    evidence: str = ""
    settled_position: int | None = None
    settled_by: str | None = None  # OUTCOME or OPERATOR:<name>
    late_outcomes: tuple[LateOutcome, ...] = ()


class Obligation(msgspec.Struct, frozen=True, kw_only=True):
    """An open attempt (PUBLISHING or UNKNOWN) that still has to be settled."""

    attempt_id: str
    lane: str
    key: str | None
    state: AttemptState
    since_position: int


class Lane(msgspec.Struct, frozen=True, kw_only=True):
    """A destination lane's replicated state: gate, policy and counters (``lane/<name>``)."""

    name: str
    gate: Gate = Gate.OPEN
    gate_position: int | None = None
    capacity: int | None = None
    quota: int | None = None  # admissions per second (a token bucket, 1 s of burst)
    # the bucket, replicated: milli-tokens left at broker time quota_at_ms (None: full)
    quota_tokens_milli: int = 0
    quota_at_ms: int | None = None
    retry_max: int = DEFAULT_RETRY_MAX
    unavailable_max: int = DEFAULT_UNAVAILABLE_MAX  # LANE_UNAVAILABLE attempts, then FAILED
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    ordered: bool = False
    handoff_lead_ms: int = 0  # the destination holds messages until deliverAt this long
    # the latest Trusted UTC earliest a winning admission of this lane was decided with:
    # true time is at least this, so a restarted owner's clock never reads earlier
    last_decided_ms: int = 0
    config_revision: int = 0
    counts: dict[str, int] = msgspec.field(default_factory=dict)  # messages by state
    open_attempts: int = 0
    admissions: int = 0


class RetainCatchUp(msgspec.Struct, frozen=True, kw_only=True):
    """What a lane's retention leaves to catch up: its messages that ended before
    ``before_position`` (and at or after ``after_position``) have no ``retain`` entry of
    their own; a RETAIN_BACKFILL gives each one at ``expire_at_ms`` (the broker time the
    retention was replicated + that retention) whose SCHEDULE result goes at
    ``result_until_ms`` (that time + the dedup window then; 0: kept).

    The first retention's (``LaneLimit.catch_up``) covers every message before it. One of
    a retention given back after it was 0 (``LaneLimit.later_catch_ups``) covers those that
    ended while it was 0, from ``after_position``: UNSET (not encoded, so the first's
    bytes are as they were) means from the start."""

    before_position: int
    expire_at_ms: int
    result_until_ms: int
    after_position: int | msgspec.UnsetType = msgspec.UNSET

    def covers(self, updated_position: int) -> bool:
        """Whether a message last changed at ``updated_position`` ended in its range."""
        after = self.after_position if isinstance(self.after_position, int) else 0
        return after <= updated_position < self.before_position


class LaneLimit(msgspec.Struct, frozen=True, kw_only=True):
    """A lane's limits on new work (``meta/lane_limits/<name>``; 0: none), from its last
    applied LANE_LIMITS. Kept beside the lane, not in it, so a lane's value (and every
    state digest) stays as it was for lanes that never had limits."""

    lane: str
    max_delay_ms: int = 0
    max_pending: int = 0
    position: int = 0  # of the LANE_LIMITS that set them
    # retention (``nereus.machine.retention``): how long a terminal message is kept, and
    # how long a result answers a retry of its record. UNSET (never replicated; not even
    # encoded, so limits set before retention existed keep their bytes) or 0: kept.
    retention_ms: int | msgspec.UnsetType = msgspec.UNSET
    dedup_window_ms: int | msgspec.UnsetType = msgspec.UNSET
    # set once, by the LANE_LIMITS (with ``catch_up``) that first gave the lane a retention;
    # UNSET otherwise, and not encoded: values written without it keep their bytes
    catch_up: RetainCatchUp | msgspec.UnsetType = msgspec.UNSET
    # with ``catch_up_kept`` (LANE_LIMITS): where the retention last became 0 (kept), while
    # it is 0; and one catch-up for each time a retention was given back after being 0, for
    # the messages that ended meanwhile. UNSET (not encoded) until then.
    kept_since: int | msgspec.UnsetType = msgspec.UNSET
    later_catch_ups: tuple[RetainCatchUp, ...] | msgspec.UnsetType = msgspec.UNSET

    def catch_ups(self) -> tuple[RetainCatchUp, ...]:
        """Every catch-up of the lane, the first one's first (their ranges do not meet)."""
        first = (self.catch_up,) if isinstance(self.catch_up, RetainCatchUp) else ()
        later = self.later_catch_ups if isinstance(self.later_catch_ups, tuple) else ()
        return first + later


class StageCatchUp(msgspec.Struct, frozen=True, kw_only=True):
    """What a shard window given (first, or back after 0) leaves to catch up
    (``ShardRetentionValue.stage_catch_up``): payload stages no message used whose last
    change was before ``before_position`` may have no ``p`` entry; a RETAIN_BACKFILL gives
    each one at its reservation's expiry + ``window_ms``."""

    before_position: int
    window_ms: int


class ResultCatchUp(msgspec.Struct, frozen=True, kw_only=True):
    """What a shard window given (first, or back after 0) leaves to catch up among results
    (``ShardRetentionValue.result_catch_ups``): every ``reject`` result, and every result
    of a record that never has a lane window (``catch_up.SHARD_WINDOW_KINDS``), written at
    a position from ``after_position`` up to ``before_position`` (while the shard had no
    window) has no entry of its own; a RETAIN_BACKFILL gives each one at ``expire_at_ms``
    (the broker time the window was given + that window)."""

    after_position: int
    before_position: int
    expire_at_ms: int

    def covers(self, position: int) -> bool:
        """Whether a result written at ``position`` was written in its range."""
        return self.after_position <= position < self.before_position


class ShardRetentionValue(msgspec.Struct, frozen=True, kw_only=True):
    """The shard's own dedup window (``meta/shard_retention``), from its last applied
    SHARD_RETENTION: how long a result whose record has no lane window (a barrier, a
    checkpoint mark, an operator mutation, a payload stage, a query barrier, a command
    naming no message) and a ``reject`` result are kept (0: for ever)."""

    dedup_window_ms: int
    position: int  # of the SHARD_RETENTION that set it
    # set by a SHARD_RETENTION asking for it (``catch_up``) that gives the shard a window it
    # had not (none before, or 0); UNSET (not encoded, so older values keep their bytes)
    stage_catch_up: StageCatchUp | msgspec.UnsetType = msgspec.UNSET
    # one per window given that the shard had not, by a SHARD_RETENTION asking for it
    # (``catch_up_results``); their ranges never meet. UNSET: none (not encoded)
    result_catch_ups: tuple[ResultCatchUp, ...] | msgspec.UnsetType = msgspec.UNSET
    # with a window of 0 set by a SHARD_RETENTION asking ``catch_up_results``: from where
    # results have had no entry (0 when the shard had no window before, else that record's
    # position). UNSET: not encoded
    kept_since: int | msgspec.UnsetType = msgspec.UNSET

    def catch_ups(self) -> tuple[ResultCatchUp, ...]:
        """The shard's result catch-ups, oldest first (none: empty)."""
        found = self.result_catch_ups
        return found if isinstance(found, tuple) else ()

    def kept_from(self) -> int:
        """From where results have had no entry under this value's window of 0: its
        ``kept_since``, or (a value from before it) the record that set it, which is
        where it is known to begin."""
        return self.kept_since if isinstance(self.kept_since, int) else self.position


class PayloadStage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A large payload's durable stage (``payload/<id>``): RESERVED then COMMITTED, then
    used by one message (``used_by``: its SCHEDULE was applied; another SCHEDULE naming it
    is REJECTED ``PAYLOAD_IN_USE``, since sweeping either message removes the stage).

    ``omit_defaults``: a stage no SCHEDULE used has the bytes it had before ``used_by``."""

    payload_id: str
    state: str  # RESERVED | COMMITTED
    size_bytes: int
    sha256: str
    expires_at_ms: int
    object_key: str | None
    position: int
    used_by: str | None = None  # the delayMessageId whose SCHEDULE references it


class Activation(msgspec.Struct, frozen=True, kw_only=True):
    """The last applied activation barrier (``meta/activation``)."""

    barrier_id: str
    owner_id: str
    fencing_epoch: int
    position: int


class CheckpointMarkValue(msgspec.Struct, frozen=True, kw_only=True):
    """The last applied CHECKPOINT_MARK (``meta/checkpoint_mark``)."""

    checkpoint_id: str
    position: int


_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}
T = TypeVar("T")


# Canonical bytes of a state value. The encoder's bound method itself, not a function
# calling it: apply encodes three or four values per record.
encode_value: Final[Callable[[object], bytes]] = _encoder.encode


def decode_value(data: bytes, kind: type[T]) -> T:
    """Decode a state value of a known type."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.msgpack.Decoder(kind)
    result: T = decoder.decode(data)
    return result


@functools.lru_cache(maxsize=256)
def decode_shared(data: bytes, kind: type[T]) -> T:
    """``decode_value`` for a small value many records read unchanged (the activation, a
    lane's limits, the shard's retention): decoded once per distinct bytes. Only for
    frozen values holding nothing mutable, since every caller gets the same object."""
    return decode_value(data, kind)


def encode_int(value: int) -> bytes:
    """A counter in ``meta``: signed 64-bit big-endian."""
    return value.to_bytes(8, "big", signed=True)


def decode_int(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)
