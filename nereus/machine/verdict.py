"""What a handler decided about one record, before it becomes a stored ``Result``.

``Verdict`` is a frozen msgspec Struct rather than a frozen dataclass: every record
builds one, and a frozen dataclass pays an ``object.__setattr__`` per field on
construction (about 1 us per record, several percent of the apply path).
"""

from __future__ import annotations

from typing import TypedDict, Unpack

import msgspec

from nereus.machine.reasons import Reason
from nereus.records.vocabulary import ResultStatus


class Ids(TypedDict, total=False):
    """The identifiers a result names, when the record has them."""

    delay_message_id: str | None
    generation: int | None
    attempt_id: str | None


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    status: ResultStatus
    reason: Reason | None = None
    detail: str | None = None
    delay_message_id: str | None = None
    generation: int | None = None
    attempt_id: str | None = None


def applied(detail: str | None = None, **ids: Unpack[Ids]) -> Verdict:
    return Verdict(status=ResultStatus.APPLIED, detail=detail, **ids)


def rejected(reason: Reason, detail: str, **ids: Unpack[Ids]) -> Verdict:
    return Verdict(status=ResultStatus.REJECTED, reason=reason, detail=detail, **ids)


def stale(reason: Reason, detail: str, **ids: Unpack[Ids]) -> Verdict:
    return Verdict(status=ResultStatus.STALE, reason=reason, detail=detail, **ids)


def recorded(reason: Reason, detail: str, **ids: Unpack[Ids]) -> Verdict:
    return Verdict(status=ResultStatus.RECORDED, reason=reason, detail=detail, **ids)
