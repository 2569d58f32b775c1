"""Does a shard's Shard Log still hold what its state store says it applied?

The log must extend past the store's applied position (a log ahead of the store is
normal), and the record at that position must be the one applied: every record leaves a
result carrying its position and SHA-256 (under its dedup key, or ``reject/<position>``),
so one log read and two point reads prove it. Otherwise state and log have diverged: an
append now would reuse a position the state already used, and replay would not rebuild the
state, so nothing may be appended until the shard is recovered. Pure: the caller reads the
store and the log and turns a ``Divergence`` into an error naming the shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from nereus.machine import dedup_key
from nereus.records import codec
from nereus.records.batch import Member, unpack
from nereus.records.codec import DecodeFailure
from nereus.records.system import PublishBatch
from nereus.state import keys
from nereus.state.values import Result, decode_value

ENDS_BEFORE_APPLIED: Final = "ENDS_BEFORE_APPLIED"
RECORD_DIFFERS: Final = "RECORD_DIFFERS"


@dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """Why a log and a state store disagree."""

    problem: str  # ENDS_BEFORE_APPLIED or RECORD_DIFFERS
    applied_position: int  # the store's last applied position
    log_end: int  # the position the log would give its next record
    detail: str  # one sentence in operator terms


def log_ends_before(applied_position: int | None, log_end: int) -> Divergence | None:
    """The log ends at or before the applied position: the applied record is gone."""
    if applied_position is None or log_end > applied_position:
        return None
    lost = (f"position {applied_position} is" if log_end == applied_position
            else f"positions {log_end}..{applied_position} are")
    return Divergence(
        problem=ENDS_BEFORE_APPLIED, applied_position=applied_position, log_end=log_end,
        detail=f"the Shard Log ends at position {log_end} but the state has applied up to "
        f"position {applied_position}: {lost} missing from the log")


def applied_record_differs(
    get: Callable[[bytes], bytes | None], applied_position: int, log_end: int,
    record: bytes | None,
) -> Divergence | None:
    """The record the log holds at the applied position is not the one the state applied.

    ``get`` reads the store; ``record`` is the log's payload at ``applied_position`` (None:
    the log holds no record there, though it extends past it).
    """
    if record is None:
        return _differs(applied_position, log_end, "the log holds no record there")
    sha = hashlib.sha256(record).hexdigest()
    raw = get(keys.reject_key(applied_position))
    decoded = codec.decode(record)
    if type(decoded) is PublishBatch and not isinstance(members := unpack(decoded),
                                                          DecodeFailure):
        return _batch_differs(get, applied_position, log_end, raw, members)
    if raw is not None:
        stored = decode_value(raw, Result)
    else:
        key = None if isinstance(decoded, DecodeFailure) else dedup_key(decoded)
        found = None if key is None else get(keys.result_key(key))
        if found is None:
            return _differs(applied_position, log_end, "the state holds no result for it")
        stored = decode_value(found, Result)
    if stored.record_sha256 != sha:
        return _differs(applied_position, log_end,
                        f"its SHA-256 is {sha[:16]}.., the state applied {stored.kind} "
                        f"{stored.record_sha256[:16]}..")
    return None


def _batch_differs(get: Callable[[bytes], bytes | None], applied_position: int, log_end: int,
                   reject: bytes | None, members: list[tuple[bytes, Member]]) -> Divergence | None:
    """A PUBLISH_BATCH leaves no result of its own: its members' results carry their own
    bytes' SHA-256 (a rejected member's under ``reject/<position>``, its last member's under
    its dedup key), so those prove the batch was the record applied."""
    shas = {hashlib.sha256(data).hexdigest() for data, _ in members}
    if reject is not None and decode_value(reject, Result).record_sha256 in shas:
        return None
    data, last = members[-1]
    key = dedup_key(last)
    found = None if key is None else get(keys.result_key(key))
    if found is None:
        return _differs(applied_position, log_end,
                        "the state holds no result for its batch's last member")
    stored = decode_value(found, Result)
    if stored.record_sha256 != hashlib.sha256(data).hexdigest():
        return _differs(applied_position, log_end,
                        f"its batch's last member is not the {stored.kind} the state applied")
    return None


def _differs(applied_position: int, log_end: int, why: str) -> Divergence:
    return Divergence(
        problem=RECORD_DIFFERS, applied_position=applied_position, log_end=log_end,
        detail=f"the Shard Log's record at the applied position {applied_position} is not the "
        f"one the state applied ({why}); the log ends at position {log_end}")
