"""The canonical codec for Shard Log records.

Layout of one record (the payload of one log frame)::

    b"NR"  format_version (1 byte)  MessagePack map of one tagged record

The map is the record Struct with a ``kind`` tag, every field present, dictionaries in
sorted key order: the same logical record always gives the same bytes, so the same
bytes mean the same command, which is what deduplication compares. Decoding never
raises: damaged, unknown or non-canonical bytes come back as a ``DecodeFailure`` naming
a reason code and the byte offset or field at fault; the state machine turns that into a
REJECTED result. Changing the layout bumps ``FORMAT_VERSION``.

A field added after 0.1.0 defaults to ``msgspec.UNSET`` (absent from the bytes, so records
without it are byte for byte those of level 1) and is listed in ``FIELD_LEVELS`` with the
feature level that allows it (``nereus.features``): ``encode_at`` refuses to write it below
that level and ``decode`` refuses to read it above the level it is given, so decoding stays
strict for what the level allows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from nereus.features import PUBLISH_BATCH_LEVEL, SUPPORTED_LEVEL, TEST_LEVEL, FeatureLevelError
from nereus.records.client import (
    Cancel,
    PayloadCommit,
    PayloadReserve,
    QueryBarrier,
    Reschedule,
    Schedule,
)
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
from nereus.records.system import (
    ActivationBarrier,
    CheckpointMark,
    ClaimResult,
    PublishAdmission,
    PublishBatch,
    PublishOutcome,
    RetainBackfill,
    RouteIdentity,
    Sweep,
)

MAGIC: Final = b"NR"
FORMAT_VERSION: Final = 2  # 2: owner and epoch on every system mutation
HEADER: Final = MAGIC + bytes([FORMAT_VERSION])

ClientCommand = Schedule | Cancel | Reschedule | QueryBarrier | PayloadReserve | PayloadCommit
SystemMutation = (
    PublishAdmission | PublishOutcome | ClaimResult | ActivationBarrier | CheckpointMark
    | RouteIdentity | Sweep | RetainBackfill
)
OperatorMutation = (
    LaneGate | LaneConfig | LaneLimits | AttemptResolve | MessageBreak | ShardPause | ShardResume
    | ShardRetention | ShardLimits
)
# an envelope carries records; it is no mutation itself (``nereus.records.batch``)
Record = ClientCommand | SystemMutation | OperatorMutation | PublishBatch

CLIENT_COMMANDS: Final = (Schedule, Cancel, Reschedule, QueryBarrier, PayloadReserve, PayloadCommit)
SYSTEM_MUTATIONS: Final = (PublishAdmission, PublishOutcome, ClaimResult, ActivationBarrier,
                           CheckpointMark, RouteIdentity, Sweep, RetainBackfill)
OPERATOR_MUTATIONS: Final = (LaneGate, LaneConfig, LaneLimits, AttemptResolve, MessageBreak,
                             ShardPause, ShardResume, ShardRetention, ShardLimits)
ENVELOPES: Final = (PublishBatch,)
ALL_KINDS: Final = tuple(
    str(cls.__struct_config__.tag)
    for cls in (*CLIENT_COMMANDS, *SYSTEM_MUTATIONS, *OPERATOR_MUTATIONS, *ENVELOPES)
)

_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder: msgspec.msgpack.Decoder[Record] = msgspec.msgpack.Decoder(Record)
_AT_BYTE = re.compile(r"byte (\d+)")
_AT_FIELD = re.compile(r"at `([^`]+)`")


@dataclass(frozen=True, slots=True)
class DecodeFailure:
    """Why a byte string is not a record; the state machine records it as REJECTED."""

    # BAD_MAGIC, UNSUPPORTED_VERSION, MALFORMED, INVALID_FIELD, NON_CANONICAL,
    # UNSUPPORTED_FEATURE (a field above the level the record is read at)
    reason: str
    detail: str
    at_byte: int | None = None
    field: str | None = None


def encode(record: Record) -> bytes:
    """The canonical bytes of ``record``."""
    return HEADER + _encoder.encode(record)


# record type -> kind (a dict lookup: apply asks for every record)
KINDS: Final[dict[type[Any], str]] = {
    cls: str(cls.__struct_config__.tag)
    for cls in (*CLIENT_COMMANDS, *SYSTEM_MUTATIONS, *OPERATOR_MUTATIONS, *ENVELOPES)
}


def kind_of(record: Record) -> str:
    """The record's kind name (its tag), such as ``SCHEDULE``."""
    return KINDS[type(record)]


# kind -> field -> the feature level that allows writing it (module docstring)
FIELD_LEVELS: Final[dict[type[Any], dict[str, int]]] = {QueryBarrier: {"label": TEST_LEVEL}}
# kind -> the feature level that allows writing it at all (a kind 0.1.0 did not have)
KIND_LEVELS: Final[dict[type[Any], int]] = {PublishBatch: PUBLISH_BATCH_LEVEL}
_GATED: Final = frozenset((*FIELD_LEVELS, *KIND_LEVELS))


def needed_level(record: Record) -> tuple[int, str | None]:
    """The lowest feature level that allows ``record``, and the field that needs it (None:
    the kind itself, or nothing)."""
    gated = FIELD_LEVELS.get(type(record))
    level, field = KIND_LEVELS.get(type(record), 1), None
    if gated:
        for name, at in gated.items():
            if at > level and getattr(record, name) is not msgspec.UNSET:
                level, field = at, name
    return level, field


def encode_at(record: Record, level: int) -> bytes:
    """``encode(record)`` for a writer whose feature level is ``level``: a field the level
    does not allow yet raises ``FeatureLevelError`` naming it, and nothing is written."""
    needed, field = needed_level(record)
    if needed > level:
        raise FeatureLevelError(
            f"{_gated_name(record, field)} needs feature level {needed}; the level in force "
            f"is {level}", hint="nereus upgrade finalize raises it once every node supports it")
    return encode(record)


def decode(data: bytes, level: int = SUPPORTED_LEVEL) -> Record | DecodeFailure:
    """Decode one record read at feature level ``level``; never raises."""
    if data[:3] != HEADER:
        return _bad_header(data)
    body = data[3:]
    try:
        record = _decoder.decode(body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _AT_FIELD.search(text)
        return DecodeFailure("INVALID_FIELD", text, field=match.group(1) if match else None)
    except msgspec.DecodeError as exc:
        text = str(exc)
        match = _AT_BYTE.search(text)
        at = int(match.group(1)) + len(HEADER) if match else None
        if at is None and "truncated" in text:
            at = len(data)
        return DecodeFailure("MALFORMED", text, at_byte=at)
    if _encoder.encode(record) != body:
        return DecodeFailure(
            "NON_CANONICAL",
            "the record decodes but is not in canonical form (field order, map order or "
            "integer width differs); re-encode it with nereus.records.encode",
        )
    if type(record) in _GATED:
        needed, field = needed_level(record)
        if needed > level:
            return DecodeFailure(
                "UNSUPPORTED_FEATURE", f"{_gated_name(record, field)} needs feature level "
                f"{needed}; this record is read at level {level}", field=field)
    return record


def _gated_name(record: Record, field: str | None) -> str:
    """``KIND.field``, or ``KIND`` when the kind itself is what a level allows."""
    return kind_of(record) if field is None else f"{kind_of(record)}.{field}"


def _bad_header(data: bytes) -> DecodeFailure:
    """Why ``data`` does not start with ``HEADER``."""
    if len(data) < len(HEADER) or data[:2] != MAGIC:
        got = data[:2].hex() or "nothing"
        return DecodeFailure("BAD_MAGIC", f"expected magic 4e52 ('NR'), found {got}", at_byte=0)
    return DecodeFailure(  # the magic is right, so the version byte is not
        "UNSUPPORTED_VERSION",
        f"record format version {data[2]} is not supported (this build reads {FORMAT_VERSION})",
        at_byte=2,
    )


def to_builtins(record: Record) -> dict[str, object]:
    """A JSON-friendly dict of the record (bytes as text where possible), for display."""
    data = msgspec.to_builtins(record)
    assert isinstance(data, dict)
    return data
