"""``apply``: the pure function at the centre of a Delay Shard.

``apply(view, record, position=..., broker_ms=...)`` decides what one Shard Log record does
to the state in ``view`` and returns the result and the writes; it writes nothing and reads
no clock, so replaying a log from a state always gives the same writes and digest. Every
record leaves exactly one stable result: undecodable or invalid bytes are REJECTED (reason,
byte or field) under ``reject/<position>``; a dedup key already applied with the same bytes
answers its first result with no state change, with other bytes ``DUPLICATE_CONFLICT``;
otherwise the handler's verdict under ``result/<dedup key>`` (with a ``retain`` entry when
a window holds: ``retention``). The applied position and counters are part of the writes,
so state, results and position land in one WriteBatch; into an ``Overlay`` they are batch
aggregates written once per batch (``tx``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, Final, cast

import msgspec

from nereus.machine import catch_up, commands, control, publishing, retention
from nereus.machine.events import Event, events_of
from nereus.machine.limits import DEFAULT_LIMITS, Limits
from nereus.machine.reasons import Reason
from nereus.machine.tx import Tx
from nereus.machine.verdict import Verdict
from nereus.records import codec
from nereus.records.batch import unpack
from nereus.records.client import (
    Cancel,
    PayloadCommit,
    PayloadReserve,
    QueryBarrier,
    Reschedule,
    Schedule,
)
from nereus.records.codec import (
    KINDS,
    OPERATOR_MUTATIONS,
    DecodeFailure,
    OperatorMutation,
    Record,
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
from nereus.records.vocabulary import ResultStatus
from nereus.state import keys
from nereus.state.values import Result, decode_value, encode_value
from nereus.state.view import Layer, Overlay, StateView, Writes


class Applied(msgspec.Struct, frozen=True):
    """What applying one record decided: its result, its writes, the decoded record.

    A frozen msgspec Struct (not a frozen dataclass) because one is built per record.
    """

    result: Result
    writes: Writes
    record: Record | None
    duplicate: bool = False  # True when this is a same-bytes re-delivery of a dedup key
    # a PUBLISH_BATCH's members, each applied as the record it carries, in order (its
    # ``result`` is then the batch's own summary, stored nowhere: the members' are stored;
    # applied into an ``Overlay``, the members' writes are in it already and ``writes`` is
    # empty)
    members: tuple[Applied, ...] = ()

    @property
    def events(self) -> list[Event]:
        """What happened, typed (``nereus.machine.events``): read from the writes and the
        record when asked (the engine's owner asks; a replay does not, so it pays nothing)."""
        return events_of(self)


_sha256: Final = hashlib.sha256
# a set of types: isinstance() against a tuple of six Struct classes costs 0.4 us a record
_OPERATOR_MUTATIONS: Final = frozenset(OPERATOR_MUTATIONS)


def _operator_key(record: Any) -> str | None:
    return f"m/{record.idempotency_key}" if record.idempotency_key.strip() else None


# record type -> its dedup key (a dict lookup: this runs for every record applied)
_DEDUP_KEYS: dict[type[Any], Callable[[Any], str | None]] = {
    **dict.fromkeys((Schedule, Cancel, Reschedule, QueryBarrier, PayloadReserve, PayloadCommit),
                    lambda r: "c/" + r.command_id),
    PublishAdmission: lambda r: "a/" + r.attempt_id,
    PublishOutcome: lambda r: "o/" + r.outcome_id,
    ClaimResult: lambda r: "s/" + r.mutation_id,
    CheckpointMark: lambda r: "s/" + r.mutation_id,
    Sweep: lambda r: "s/" + r.mutation_id,
    RetainBackfill: lambda r: "s/" + r.mutation_id,
    ActivationBarrier: lambda r: "b/" + r.barrier_id,
    RouteIdentity: lambda r: f"i/{r.route_id}/{r.route}/{r.partition}/{r.partitions}",
    **dict.fromkeys(OPERATOR_MUTATIONS, _operator_key),
    PublishBatch: lambda r: None,  # an envelope: each member is deduplicated by itself
}


def dedup_key(record: Record) -> str | None:
    """The key that makes re-delivery of this record a no-op (None: not deduplicated)."""
    return _DEDUP_KEYS[type(record)](record)


Handler = Callable[[Tx, Any], Verdict]

# The handler of each record type. A dict lookup by type, because a ``match`` over a
# dozen class patterns tests them one by one on every record.
_HANDLERS: Final[dict[type[Record], Handler]] = {
    Schedule: commands.schedule,
    Cancel: commands.cancel,
    Reschedule: commands.reschedule,
    QueryBarrier: commands.query_barrier,
    PayloadReserve: commands.payload_reserve,
    PayloadCommit: commands.payload_commit,
    PublishAdmission: publishing.admission,
    PublishOutcome: publishing.outcome,
    ClaimResult: publishing.claim_result,
    ActivationBarrier: control.activation_barrier,
    RouteIdentity: control.route_identity,
    CheckpointMark: control.checkpoint_mark,
    Sweep: retention.sweep,
    RetainBackfill: catch_up.backfill,
    **dict.fromkeys(OPERATOR_MUTATIONS, control.operator_mutation),
}


@functools.lru_cache(maxsize=8)
def _replicated_limits(raw: bytes) -> Limits:
    """The shard's own limits (its last SHARD_LIMITS): they, not the caller's, bind every
    record after it. Decoded once per distinct value."""
    return decode_value(raw, Limits)


def _result(verdict: Verdict, kind: str, position: int, sha: str) -> Result:
    return Result(
        status=verdict.status, kind=kind, position=position, record_sha256=sha,
        reason=verdict.reason, detail=verdict.detail,
        delay_message_id=verdict.delay_message_id, generation=verdict.generation,
        attempt_id=verdict.attempt_id,
    )


def _rejected(tx: Tx, result: Result, *, advance: bool = True) -> Result:
    """``result`` (REJECTED) stored under ``reject/<position>``, kept as long as the shard's
    window keeps rejections; the position advanced unless the caller did."""
    tx.put(keys.reject_key(result.position), encode_value(result))
    retention.retain_reject(tx)
    if advance:
        tx.advance()
    return result


def _undecodable(failure: DecodeFailure, position: int, sha: str) -> Result:
    return Result(status=ResultStatus.REJECTED, kind="UNKNOWN", position=position,
                  record_sha256=sha, reason=failure.reason, detail=failure.detail,
                  at_byte=failure.at_byte, field=failure.field)


def _conflict(earlier: Result, key: str, kind: str, position: int, sha: str) -> Result:
    """A dedup key applied before with other bytes: this record is REJECTED."""
    return Result(
        status=ResultStatus.REJECTED, kind=kind, position=position, record_sha256=sha,
        reason=Reason.DUPLICATE_CONFLICT,
        detail=f"{key} was first applied at position {earlier.position} with different "
        "bytes; a retry must reuse the prepared command unchanged",
        delay_message_id=earlier.delay_message_id,
    )


def apply(
    view: StateView,
    record: bytes,
    *,
    position: int,
    broker_ms: int,
    limits: Limits = DEFAULT_LIMITS,
) -> Applied:
    """Apply one Shard Log record at ``position``, persisted by the broker at ``broker_ms``.

    ``limits`` bind a shard whose log has not replicated its own (SHARD_LIMITS, kept in
    ``meta/shard_limits``); once it has, those bind, whatever the caller passes. Offline
    tools and the engine pass the defaults, so every replay decides the same."""
    decoded = codec.decode(record)
    replicated = view.get(keys.META_SHARD_LIMITS)
    if replicated is not None:
        limits = _replicated_limits(replicated)
    if type(decoded) is PublishBatch:  # its members' bytes are hashed, each by itself
        return _apply_batch(view, decoded, position, broker_ms, limits, record)
    return _apply_decoded(view, decoded, position, broker_ms, limits,
                          _sha256(record).hexdigest())


def _apply_batch(view: StateView, batch: PublishBatch, position: int, broker_ms: int,
                 limits: Limits, record: bytes) -> Applied:
    """Each member applied as the record it carries, at the batch's position, over the
    writes of the members before it: the same state, results and digest as those records
    applied one by one (``nereus.records.batch``). A member that is not a canonical
    admission or outcome rejects the batch whole, before any member applies."""
    members = unpack(batch)
    if isinstance(members, DecodeFailure):
        tx = Tx(view, position=position, broker_ms=broker_ms, limits=limits)
        rejected = Result(status=ResultStatus.REJECTED, kind="PUBLISH_BATCH", position=position,
                          record_sha256=_sha256(record).hexdigest(), reason=members.reason,
                          detail=members.detail, field=members.field)
        return Applied(_rejected(tx, rejected), tx.writes, batch)
    # into the runner's Overlay directly (its aggregates are already written in place), or
    # over any other view through a Layer whose writes are the batch's
    layer = view if type(view) is Overlay else Layer(view)
    done: list[Applied] = []
    for data, member in members:
        one = _apply_decoded(layer, member, position, broker_ms, limits,
                             _sha256(data).hexdigest())
        layer.merge(one.writes)
        done.append(one)
    summary = Result(status=ResultStatus.APPLIED, kind="PUBLISH_BATCH", position=position,
                     record_sha256="", detail=f"{len(done)} members applied one by one")
    writes: Writes = {} if layer is view else layer.finish()
    return Applied(summary, writes, batch, members=tuple(done))


def _apply_decoded(view: StateView, decoded: Record | DecodeFailure, position: int,
                   broker_ms: int, limits: Limits, sha: str) -> Applied:
    """Apply one decoded record (not an envelope) whose bytes hash to ``sha``."""
    tx = Tx(view, position=position, broker_ms=broker_ms, limits=limits)
    if isinstance(decoded, DecodeFailure):
        return Applied(_rejected(tx, _undecodable(decoded, position, sha)), tx.writes, None)
    cls = type(decoded)
    kind = KINDS[cls]
    if cls in _OPERATOR_MUTATIONS:
        missing = control.check_operator(cast(OperatorMutation, decoded))
        if missing is not None:
            result = _rejected(tx, _result(missing, kind, position, sha))
            return Applied(result, tx.writes, decoded)
    key = _DEDUP_KEYS[cls](decoded)
    assert key is not None
    result_key = keys.result_key(key)
    first = view.get(result_key)  # nothing written yet: the view is all there is
    if first is not None:
        earlier = decode_value(first, Result)
        tx.advance()
        if earlier.record_sha256 == sha:
            return Applied(earlier, tx.writes, decoded, duplicate=True)
        result = _rejected(tx, _conflict(earlier, key, kind, position, sha), advance=False)
        return Applied(result, tx.writes, decoded)
    verdict = _HANDLERS[cls](tx, decoded)
    result = Result(  # positional (see Message): status, kind, position, record_sha256, ...
        verdict.status, kind, position, sha, verdict.reason, verdict.detail,
        verdict.delay_message_id, verdict.generation, verdict.attempt_id,
    )
    writes = tx.writes
    writes[result_key] = encode_value(result)
    if cls is not Schedule or verdict.status is not ResultStatus.APPLIED:  # the hot path
        retention.retain_result(tx, decoded, verdict, key)
    tx.advance()
    return Applied(result, writes, decoded)
