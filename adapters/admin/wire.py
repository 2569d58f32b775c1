"""The admin socket's request and answer bodies, as typed values shared by the engine
(which decodes requests and encodes answers) and the admin client (the reverse).

Bytes travel as base64 strings (msgspec's encoding of ``bytes``). A request that does not
fit its type is a 400 naming the field (``Expected `int`, got `float` - at `$.wait_ms```).
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec

from nereus.client.receipt import Receipt
from nereus.errors import UsageError
from nereus.operator.plan import PlanDocument

T = TypeVar("T", bound=msgspec.Struct)


class RecordToAppend(msgspec.Struct, frozen=True, kw_only=True):
    """One prepared command: its shard and bytes, and its identity (``Prepared``), which
    its ``Receipt`` names."""

    shard: str
    data: bytes
    kind: str = ""
    command_id: str = ""
    delay_message_id: str | None = None

    def queued(self, position: int, broker_ms: int) -> Receipt:
        """Its receipt once the log holds it at ``position``."""
        return Receipt.queued(kind=self.kind, delay_message_id=self.delay_message_id,
                              command_id=self.command_id, shard=self.shard,
                              position=position, broker_ms=broker_ms)


class AppendRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/commands``: records to append, grouped per shard by the engine; with
    ``wait_ms`` above 0 the answer carries each one's applied result once the shard applied
    it within that time."""

    records: Annotated[list[RecordToAppend], msgspec.Meta(min_length=1)]
    wait_ms: Annotated[int, msgspec.Meta(ge=0, le=600_000)] = 0


class AppendAnswer(msgspec.Struct, frozen=True, kw_only=True):
    receipts: list[Receipt]  # one per request record, in the request's order


class PlanRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/mutations/plan``: one operator mutation (its record) to plan against the
    live shard, after the records in ``before`` (earlier mutations of the same batch)."""

    shard: str
    data: bytes
    before: list[bytes] = msgspec.field(default_factory=list)


class PlanAnswer(PlanDocument, frozen=True, kw_only=True):
    shard: str


class CheckpointRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/checkpoints``: take one shard's checkpoint now, answering once it is
    catalogued (or failing after ``timeout_s``)."""

    shard: str
    timeout_s: Annotated[float, msgspec.Meta(ge=1, le=86_400)] = 3600


class Empty(msgspec.Struct, frozen=True):
    """A request with no fields (``POST /v1/shutdown``)."""


class Stopping(msgspec.Struct, frozen=True):
    """``POST /v1/shutdown``'s answer: the engine has begun to stop."""

    stopping: bool


def request_of(body: object, kind: type[T]) -> T:
    """The request ``body`` (a decoded JSON object) as ``kind``; a UsageError naming the
    field that does not fit."""
    try:
        return msgspec.convert(body, kind)
    except msgspec.ValidationError as exc:
        raise UsageError(f"request body: {exc}") from None
