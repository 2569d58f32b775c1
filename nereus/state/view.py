"""Read access to shard state, and the in-memory overlay a batch applies into.

``apply`` reads through a ``StateView`` and returns the writes it wants; it never writes
by itself. The shard runner applies a whole batch of records into one ``Overlay`` (so a
later record sees an earlier record's writes) and then commits the overlay's writes as
ONE synced WriteBatch together with the applied position.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Protocol

from nereus.state.values import Lane, encode_int, encode_value

Writes = dict[bytes, bytes | None]  # key -> new value, or None to delete


class StateView(Protocol):
    """Point reads of the current state, and the keys under a prefix in key order (an
    ORDERED lane's key queue: apply reads the first one)."""

    def get(self, key: bytes) -> bytes | None: ...

    def keys_under(self, prefix: bytes) -> Iterator[bytes]: ...


class EmptyView:
    """The state of a shard that has applied nothing."""

    def get(self, key: bytes) -> bytes | None:
        return None

    def keys_under(self, prefix: bytes) -> Iterator[bytes]:
        return iter(())


_KEEP_READ_BYTES = 256  # base values up to this size are kept for the batch


class Overlay:
    """Pending writes layered over a base view; reads see the pending writes first.

    ``deferred`` holds the batch aggregates as typed values (lane values, the ``meta``
    records-applied counter and applied position): apply updates them in place of writing
    them, and ``finish`` encodes each once per batch. A key is in ``writes`` or ``deferred``,
    never both; ``get`` encodes a deferred value on demand, so a raw read sees exactly the
    bytes the batch will commit, which are canonical: the digest is unchanged. Small base
    reads and misses are kept for the batch (``_read``: every record reads keys nobody
    writes); large values are not. The base must not change while the Overlay is in use.
    """

    __slots__ = ("_base", "_base_get", "_read", "deferred", "scanned", "writes")

    def __init__(self, base: StateView) -> None:
        self._base = base
        self._base_get = base.get  # bound once: every miss of every record goes through it
        self.writes: Writes = {}
        self.deferred: dict[bytes, Lane | int] = {}
        self._read: dict[bytes, bytes | None] = {}  # base reads of this batch, misses too
        # keys of the scanned families (``order``) this batch may have written: a superset,
        # filtered by ``get`` (a record whose writes were dropped noted them too)
        self.scanned: set[bytes] = set()

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

    def keys_under(self, prefix: bytes) -> Iterator[bytes]:
        """The keys under ``prefix`` as the batch leaves them, in key order: the base's and
        those noted in ``scanned``, less the deleted."""
        noted = sorted(key for key in self.scanned if key.startswith(prefix))
        merged = heapq.merge(self._base.keys_under(prefix), noted)
        last = None
        for key in merged:
            if key != last and self.get(key) is not None:
                yield key
            last = key

    def merge(self, writes: Mapping[bytes, bytes | None]) -> None:
        self.writes.update(writes)

    def finish(self) -> Writes:
        """Every write of the batch, with the deferred aggregates encoded once."""
        writes = dict(self.writes)
        writes.update((key, _encode_aggregate(value)) for key, value in self.deferred.items())
        return writes


def _encode_aggregate(value: Lane | int) -> bytes:
    return encode_int(value) if isinstance(value, int) else encode_value(value)


class Layer(Overlay):
    """The writes of a PUBLISH_BATCH's earlier members over the view the batch applies to,
    so each member sees those before it (``nereus.machine.apply``). Over an ``Overlay`` it
    shares the overlay's batch aggregates (``deferred``, ``scanned``): the overlay encodes
    them once for the whole runner batch, members included. Over any other view it keeps
    its own and ``finish`` encodes them, as an Overlay does."""

    __slots__ = ("_shared",)

    def __init__(self, base: StateView) -> None:
        super().__init__(base)
        self._shared = isinstance(base, Overlay)
        if isinstance(base, Overlay):
            self.deferred, self.scanned = base.deferred, base.scanned

    def finish(self) -> Writes:
        """The members' writes (with the aggregates, unless the overlay below owns them)."""
        return dict(self.writes) if self._shared else super().finish()
