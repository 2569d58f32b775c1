"""One way to submit commands: a ``CommandSink`` appends prepared records to their shards'
Shard Logs and answers with typed ``Receipt`` values.

Two sinks exist. ``LogSink`` (here: the I/O is the appender it is given) appends straight
to the logs — the embedded default with no engine, tests, library users; its receipts are
QUEUED. The engine's sink (``nereus.adapters.admin.admin_client.EngineSink``) sends the records
to the running engine, which appends them and, asked to wait, answers with the APPLIED
result. The CLI's message, mutation and batch paths all go through one of the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

import msgspec

from nereus.client.prepare import Prepared
from nereus.client.queue import Appender, queue
from nereus.shard import ShardId
from nereus.timespec import format_time_ms

QUEUED: Final = "QUEUED"
APPLIED: Final = "APPLIED"


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """What the Shard Log — and, once applied, the shard — says of one submitted command.

    ``evidence`` QUEUED: the log durably holds the bytes at ``source_position``; nothing is
    known of the result yet, and the result fields are unset (absent from the document).
    APPLIED: ``result`` (APPLIED, REJECTED, STALE, RECORDED) with its reason;
    ``duplicate_of`` names the first position when the same command was applied before
    (an idempotent retry).
    """

    kind: str
    delay_message_id: str | None
    command_id: str
    shard: str
    source_position: int
    broker_time: str | None
    evidence: str
    # set once APPLIED (``msgspec.to_builtins`` leaves unset fields out)
    result: str | msgspec.UnsetType | None = msgspec.UNSET
    reason: str | msgspec.UnsetType | None = msgspec.UNSET
    detail: str | msgspec.UnsetType | None = msgspec.UNSET
    position: int | msgspec.UnsetType | None = msgspec.UNSET
    generation: int | msgspec.UnsetType | None = msgspec.UNSET
    attempt_id: str | msgspec.UnsetType | None = msgspec.UNSET
    duplicate_of: int | msgspec.UnsetType | None = msgspec.UNSET
    record_sha256: str | msgspec.UnsetType | None = msgspec.UNSET

    def __post_init__(self) -> None:
        if self.applied:  # an APPLIED receipt carries every result key (null when none)
            for name in _RESULT_FIELDS:
                if getattr(self, name) is msgspec.UNSET:
                    msgspec.structs.force_setattr(self, name, None)

    @property
    def applied(self) -> bool:
        return self.evidence == APPLIED


# the fields a receipt has only once the shard applied the command (the ones with a default)
_RESULT_FIELDS: Final = tuple(f.name for f in msgspec.structs.fields(Receipt) if not f.required)


class CommandSink(Protocol):
    """Appends prepared commands (grouped per shard, in order) and answers one receipt each,
    in the order given. ``wait``: answer with the APPLIED result where the shard applies
    the command in time (a sink that cannot wait refuses)."""

    def submit(self, prepared: Sequence[Prepared], *, wait: bool) -> list[Receipt]: ...


def queued_receipt(item: Prepared, position: int, broker_ms: int) -> Receipt:
    return Receipt(kind=item.kind, delay_message_id=item.delay_message_id,
                   command_id=item.command_id, shard=str(item.shard),
                   source_position=position, broker_time=format_time_ms(broker_ms),
                   evidence=QUEUED)


class LogSink:
    """Straight to the Shard Logs (no engine): QUEUED receipts; it cannot wait."""

    def __init__(self, log_for: Callable[[ShardId], Appender]) -> None:
        self._log_for = log_for

    def submit(self, prepared: Sequence[Prepared], *, wait: bool) -> list[Receipt]:
        if wait:
            raise ValueError("a LogSink cannot wait for results: no engine applies them here")
        return [queued_receipt(q.prepared, q.position, q.broker_ms)
                for q in queue(prepared, self._log_for)]
