"""Queue: append prepared commands to their shards' logs; the receipt proves durability only.

A queued receipt (evidence ``QUEUED``) says the Shard Log durably holds the bytes at a
Source Position. It does not say the shard applied them; that is ``APPLIED`` evidence,
read from the shard's results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from nereus.client.prepare import Prepared
from nereus.shard import ShardId


class ReceiptLike(Protocol):
    @property
    def position(self) -> int: ...

    @property
    def broker_ms(self) -> int: ...


class Appender(Protocol):
    def append(self, payloads: Sequence[bytes]) -> Sequence[ReceiptLike]: ...


@dataclass(frozen=True, slots=True)
class Queued:
    prepared: Prepared
    position: int
    broker_ms: int
    evidence: str = "QUEUED"


def queue(
    prepared: Sequence[Prepared],
    log_for: Callable[[ShardId], Appender],
) -> list[Queued]:
    """Append every prepared command to its shard's log (one group append per shard)."""
    by_shard: dict[ShardId, list[int]] = {}
    for index, item in enumerate(prepared):
        by_shard.setdefault(item.shard, []).append(index)
    out: list[Queued | None] = [None] * len(prepared)
    for shard, indexes in by_shard.items():
        receipts = log_for(shard).append([prepared[i].data for i in indexes])
        for index, receipt in zip(indexes, receipts, strict=True):
            out[index] = Queued(prepared[index], receipt.position, receipt.broker_ms)
    return [item for item in out if item is not None]
