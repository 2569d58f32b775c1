"""The Shard Log Protocol every backend implements: the file log, Kafka and Pulsar.

A Shard Log is one ordered partition per shard. ``append`` returns only after the
records are durable (fsync, or the broker's acks=all) and gives each a receipt with its
Source Position and broker persistence time. ``read`` returns records in position order
from any position. ``ack`` tells the backend that everything up to a position is applied
and synced (a consumer offset commit or cursor ack for monitoring); the applied position
in RocksDB stays the source of truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import msgspec


@dataclass(frozen=True, slots=True)
class Receipt:
    """Proof that the log durably holds a record: it was queued, nothing more."""

    position: int
    broker_ms: int


class LogRecord(msgspec.Struct, frozen=True):
    """One record read from a Shard Log.

    A frozen msgspec Struct, not a frozen dataclass: the reader builds one per record and
    a frozen dataclass pays an ``object.__setattr__`` per field (0.4 µs against 0.07).
    """

    position: int
    broker_ms: int
    payload: bytes


class ShardLog(Protocol):
    dense: bool  # positions are consecutive (the runner checks for gaps)

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Durably append ``payloads`` in order; one receipt each."""
        ...

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` records with positions >= ``from_position``, in order.

        Positions are increasing integers. The file log and Kafka give dense positions
        (0, 1, 2, ...); a backend whose positions have gaps (Pulsar: ledger and entry ids)
        sets ``dense = False`` and the runner then only requires them to increase.
        """
        ...

    def end_position(self) -> int:
        """The position the next appended record will get (the log's length)."""
        ...

    def ack(self, position: int) -> None:
        """Everything up to and including ``position`` is applied and synced."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class PrunableLog(ShardLog, Protocol):
    """A Shard Log whose records below a position can be deleted (log retention).

    The file log deletes whole segments, Kafka deletes records (``DeleteRecords``). The
    caller checks the Recovery Floor first; ``delete_before`` only does what it is told.
    """

    def start_position(self) -> int:
        """The first position the log still holds."""
        ...

    def delete_before(self, position: int) -> list[str]:
        """Delete what lies below ``position``; returns what went, described."""
        ...
