"""The state digest: one hash over all replicated key/values, in key order.

The replicated pairs (prefixes below 0x80) are hashed with SHA-256 as one canonical
stream: ascending key order, each pair MessagePack-framed. Key order is RocksDB's own
iteration order, so a live shard, a checkpoint and an offline replay that hold the same
state give the same digest whatever their files look like; in-memory state is sorted
first (``digest_pairs``). Local runtime state (prefixes from 0x80: claims, scheduler
cursors) is excluded: it is not derived from the log.

Pairs are framed and hashed in chunks by msgspec and hashlib (both C), so the cost per
pair is the iteration itself; that is what makes verifying a large checkpoint fast.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from itertools import islice

import msgspec

from nereus.state import keys

_DOMAIN = b"nereus-state-digest/1"
_CHUNK = 4_096
_encode = msgspec.msgpack.Encoder().encode


def framed_chunks(pairs: Iterable[tuple[bytes, bytes]]) -> Iterator[bytes]:
    """The byte stream the digest hashes, in chunks (replicated pairs only)."""
    iterator = iter(pairs)
    while chunk := list(islice(iterator, _CHUNK)):
        if chunk[-1][0][0] >= keys.REPLICATED_LIMIT:
            chunk = [pair for pair in chunk if pair[0][0] < keys.REPLICATED_LIMIT]
        yield _encode(chunk)


def new_hash() -> hashlib._Hash:
    return hashlib.sha256(_DOMAIN)


def digest_sorted(pairs: Iterable[tuple[bytes, bytes]]) -> str:
    """Digest of ``pairs`` given in ascending key order (replicated keys only)."""
    digest = new_hash()
    for chunk in framed_chunks(pairs):
        digest.update(chunk)
    return digest.hexdigest()


def digest_pairs(pairs: Iterable[tuple[bytes, bytes]]) -> str:
    """Digest of ``pairs`` in any order (sorted here first)."""
    return digest_sorted(sorted(pairs))
