"""Read access to shard state, and the in-memory overlay a batch applies into.

``apply`` reads through a ``StateView`` and returns the writes it wants; it never writes
by itself. The shard runner applies a whole batch of records into one ``Overlay`` (so a
later record sees an earlier record's writes) and then commits the overlay's writes as
ONE synced WriteBatch together with the applied position.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from nereus.state.values import Lane, encode_int, encode_value

Writes = dict[bytes, bytes | None]  # key -> new value, or None to delete


class StateView(Protocol):
    """Point reads of the current state."""

    def get(self, key: bytes) -> bytes | None: ...


class EmptyView:
    """The state of a shard that has applied nothing."""

    def get(self, key: bytes) -> bytes | None:
        return None


_KEEP_READ_BYTES = 256  # base values up to this size are kept for the batch


class Overlay:
    """Pending writes layered over a base view; reads see the pending writes first.

    ``deferred`` holds the batch aggregates as typed values: the lane values (every
    SCHEDULE moves its lane's counts) and the ``meta`` records-applied counter and
    applied position (every record moves them). Applying into an Overlay, the state
    machine updates these in place of writing them, and ``finish`` encodes each once for
    the whole batch instead of once per record. A key is in ``writes`` or in
    ``deferred``, never both (only the aggregate updates defer, and they never write);
    ``get`` encodes a deferred value on demand, so a raw read sees exactly the bytes the
    batch will commit. Encoding is canonical, so the committed bytes are the ones
    per-record writes would have left and the state digest is unchanged.

    Small reads of the base, and misses, are kept for the batch (``_read``): every record
    of a batch reads some keys nobody writes (the live activation, the pause flag, lane
    limits) and one RocksDB get costs about 2 us. Large values (messages with their
    payloads) are not kept: a record that reads one usually writes it, and the batch's
    memory stays what its writes hold. The base must not change while the Overlay is in
    use (the runner writes it only after the batch, with ``finish``).
    """

    __slots__ = ("_base", "_base_get", "_read", "deferred", "writes")

    def __init__(self, base: StateView) -> None:
        self._base = base
        self._base_get = base.get  # bound once: every miss of every record goes through it
        self.writes: Writes = {}
        self.deferred: dict[bytes, Lane | int] = {}
        self._read: dict[bytes, bytes | None] = {}  # base reads of this batch, misses too

    def get(self, key: bytes) -> bytes | None:
        writes = self.writes
        if key in writes:
            return writes[key]
        pending = self.deferred.get(key)
        if pending is not None:
            return _encode_aggregate(pending)
        read = self._read
        if key in read:
            return read[key]
        value = self._base_get(key)
        if value is None or len(value) <= _KEEP_READ_BYTES:
            read[key] = value
        return value

    def merge(self, writes: Mapping[bytes, bytes | None]) -> None:
        self.writes.update(writes)

    def finish(self) -> Writes:
        """Every write of the batch, with the deferred aggregates encoded once."""
        writes = dict(self.writes)
        writes.update((key, _encode_aggregate(value)) for key, value in self.deferred.items())
        return writes


def _encode_aggregate(value: Lane | int) -> bytes:
    return encode_int(value) if isinstance(value, int) else encode_value(value)
