"""One command's ``Receipt``: what the Shard Log — and, once applied, the shard — says of
it. The one type every path answers with: a ``LogSink`` builds it, the engine sends it
over the admin socket (``POST /v1/commands``), the CLI prints it (``--json``)."""

from __future__ import annotations

from enum import StrEnum

import msgspec

from nereus.records.vocabulary import ResultStatus
from nereus.state.values import Result
from nereus.timespec import format_time_ms


class Evidence(StrEnum):
    """How much a receipt knows."""

    QUEUED = "QUEUED"  # the Shard Log durably holds the bytes; nothing known of the result
    APPLIED = "APPLIED"  # the shard applied the command: the result fields say what it decided


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """``evidence`` QUEUED: the log holds the command at ``source_position``; the result
    fields are unset (absent from the document). APPLIED (``with_result``): every result
    field is set (null when the result has none); ``duplicate_of`` names the first position
    when the same command was applied before (an idempotent retry)."""

    kind: str
    delay_message_id: str | None
    command_id: str
    shard: str
    source_position: int
    broker_time: str | None
    evidence: Evidence
    # set together by ``with_result`` (``msgspec.to_builtins`` leaves unset fields out)
    result: ResultStatus | msgspec.UnsetType = msgspec.UNSET
    reason: str | msgspec.UnsetType | None = msgspec.UNSET
    detail: str | msgspec.UnsetType | None = msgspec.UNSET
    position: int | msgspec.UnsetType = msgspec.UNSET
    generation: int | msgspec.UnsetType | None = msgspec.UNSET
    attempt_id: str | msgspec.UnsetType | None = msgspec.UNSET
    duplicate_of: int | msgspec.UnsetType | None = msgspec.UNSET
    record_sha256: str | msgspec.UnsetType = msgspec.UNSET

    @classmethod
    def queued(cls, *, kind: str, delay_message_id: str | None, command_id: str, shard: str,
               position: int, broker_ms: int) -> Receipt:
        """What the log says of a command it holds at ``position`` since ``broker_ms``."""
        return cls(kind=kind, delay_message_id=delay_message_id, command_id=command_id,
                   shard=shard, source_position=position,
                   broker_time=format_time_ms(broker_ms), evidence=Evidence.QUEUED)

    @property
    def applied(self) -> bool:
        return self.evidence is Evidence.APPLIED

    def with_result(self, result: Result, *, record_sha256: str) -> Receipt:
        """This receipt once its shard applied it: ``result`` is the stored result the
        record left (its own, or the first one of its dedup key)."""
        duplicate = None if result.position == self.source_position else result.position
        return msgspec.structs.replace(
            self, evidence=Evidence.APPLIED, kind=result.kind,
            delay_message_id=result.delay_message_id, result=result.status,
            reason=result.reason, detail=result.detail, position=result.position,
            generation=result.generation, attempt_id=result.attempt_id,
            duplicate_of=duplicate, record_sha256=record_sha256)
