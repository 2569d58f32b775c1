"""``POST /v1/commands``: append records to their shards' logs and, asked to wait, answer
each with the result its shard applied (the loop's own ``Result``, read from RocksDB only
when the record was applied before the wait began)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import ExitStack

from nereus.adapters.admin.wire import AppendAnswer, AppendRequest
from nereus.client.receipt import Receipt
from nereus.engine.shard.owner_loop import ShardLoop
from nereus.errors import NotFound, UsageError
from nereus.machine import dedup_key
from nereus.records import decode
from nereus.records.codec import DecodeFailure
from nereus.state import keys
from nereus.state.values import Result, decode_value


def append(request: AppendRequest, loop_of: Callable[[str], ShardLoop],
           monotonic: Callable[[], float]) -> AppendAnswer:
    """Append ``request``'s records (one synced append per shard) and, with ``wait_ms``,
    wait until ``monotonic`` passes the deadline for each one's applied result."""
    grouped: dict[ShardLoop, list[tuple[int, bytes]]] = {}
    for index, item in enumerate(request.records):
        grouped.setdefault(loop_of(item.shard), []).append((index, item.data))
    receipts: list[Receipt | None] = [None] * len(request.records)
    waits: list[tuple[ShardLoop, int, bytes, int]] = []
    with ExitStack() as watching:
        if request.wait_ms > 0:  # the loops keep what they apply from before the appends on
            for loop in grouped:
                watching.enter_context(loop.watching())
        for loop, entries in grouped.items():
            got = loop.log.append([data for _, data in entries])
            if request.wait_ms > 0:
                loop.expect([receipt.position for receipt in got])
            loop.wake()
            for (index, data), receipt in zip(entries, got, strict=True):
                receipts[index] = request.records[index].queued(receipt.position,
                                                                receipt.broker_ms)
                waits.append((loop, receipt.position, data, index))
        if request.wait_ms > 0:
            deadline = monotonic() + request.wait_ms / 1000
            for loop, position, data, index in waits:
                queued = receipts[index]
                assert queued is not None
                receipts[index] = awaited(queued, loop, position, data, deadline)
    return AppendAnswer(receipts=[receipt for receipt in receipts if receipt is not None])


def awaited(queued: Receipt, loop: ShardLoop, position: int, data: bytes,
            deadline: float) -> Receipt:
    """``queued`` with the applied result at ``position``; unchanged when the wait runs
    out first."""
    result = loop.await_result(position, deadline)
    if result is None:
        if loop.applied_position is None or loop.applied_position < position:
            return queued
        result = result_at(loop, position, data)
    return queued.with_result(result, record_sha256=hashlib.sha256(data).hexdigest())


def result_at(loop: ShardLoop, position: int, data: bytes) -> Result:
    """The stored result the record at ``position`` left (its own rejection, or its dedup
    key's first result)."""
    rejected = loop.store.get(keys.reject_key(position))
    if rejected is not None:
        return decode_value(rejected, Result)
    record = decode(data)
    if isinstance(record, DecodeFailure):  # pragma: no cover - stored under reject
        raise UsageError(f"record at {position} is not decodable: {record.detail}")
    key = dedup_key(record)
    raw = loop.store.get(keys.result_key(key)) if key else None
    if raw is None:
        raise NotFound(f"no result for position {position}")
    return decode_value(raw, Result)
