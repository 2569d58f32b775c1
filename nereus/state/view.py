"""Read access to shard state, and the in-memory overlay a batch applies into.

``apply`` reads through a ``StateView`` and returns the writes it wants; it never writes
by itself. The shard runner applies a whole batch of records into one ``Overlay`` (so a
later record sees an earlier record's writes) and then commits the overlay's writes as
ONE synced WriteBatch together with the applied position.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

Writes = dict[bytes, bytes | None]  # key -> new value, or None to delete


class StateView(Protocol):
    """Point reads of the current state."""

    def get(self, key: bytes) -> bytes | None: ...


class EmptyView:
    """The state of a shard that has applied nothing."""

    def get(self, key: bytes) -> bytes | None:
        return None


class Overlay:
    """Pending writes layered over a base view; reads see the pending writes first.

    ``decoded`` lets the state machine keep decoded values across the records of one
    batch: it maps a key to the raw bytes a value was decoded from and the value. A
    memo is used only while its raw bytes equal what the key reads now, so it can save
    work but never change a result; the writes stay the encoded bytes. It exists because
    a lane value is read, decoded, updated and re-encoded by nearly every record.
    """

    __slots__ = ("_base", "decoded", "writes")

    def __init__(self, base: StateView) -> None:
        self._base = base
        self.writes: Writes = {}
        self.decoded: dict[bytes, tuple[bytes, object]] = {}

    def get(self, key: bytes) -> bytes | None:
        writes = self.writes
        if key in writes:
            return writes[key]
        return self._base.get(key)

    def merge(self, writes: Mapping[bytes, bytes | None]) -> None:
        self.writes.update(writes)

    def clear(self) -> None:
        self.writes = {}
        self.decoded = {}
