"""What ``message schedule --batch FILE`` prints: one receipt per line of the file, each
naming its line, and the counts (one JSON document with ``--json``)."""

from __future__ import annotations

import msgspec

from nereus.client import Receipt


class BatchReceipt(Receipt, frozen=True, kw_only=True):
    """A receipt (``nereus.client.Receipt``) and the line of the batch file it answers."""

    line: int


class ScheduledBatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``message schedule --batch``: how many lines were queued, how many of them the shard
    REJECTED (known with ``--wait``), and every line's receipt in file order."""

    queued: int
    rejected: int
    receipts: list[BatchReceipt]


def numbered(numbers: list[int], receipts: list[Receipt]) -> list[BatchReceipt]:
    """Each receipt with its line number (as many as there are receipts)."""
    return [BatchReceipt(**msgspec.structs.asdict(receipt), line=number)
            for number, receipt in zip(numbers, receipts, strict=False)]
