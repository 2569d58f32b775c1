"""The state digest: one hash over all replicated key/values, in key order.

The replicated pairs (prefixes below 0x80; local runtime state is excluded) are hashed in
RocksDB's key order, each MessagePack-framed, so a live shard, a checkpoint and a replay
holding the same state agree whatever their files look like (in-memory state is sorted
first: ``digest_pairs``). ``DIGEST_VERSION`` is what this build writes. **v1**: SHA-256 over
one stream of 4,096-pair chunks, kept to verify format 1 checkpoints. **v2**: BLAKE3 over
``DOMAIN_V2`` and each non-empty *leaf*'s ``[leaf, digest]`` in key order, a leaf being the
keys sharing their first ``LEAF_BYTES`` bytes, its digest BLAKE3 over its framed pairs;
leaves depend on the keys alone, so ranges cut at leaf boundaries combine:
``combine(leaves(a..m) + leaves(m..z)) == digest``. Changing either version's bytes is a new
digest version and a checkpoint format bump. The exact bytes: ``docs/state.md``; why:
``docs/decisions/0003-state-digest-leaves.md``.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Final

import msgspec
from blake3 import blake3

from nereus.state import keys

DIGEST_VERSION: Final = 2
DIGEST_VERSIONS: Final = (1, 2)
LEAF_BYTES: Final = 4

_DOMAIN = b"nereus-state-digest/1"
DOMAIN_V2: Final = b"nereus-state-digest/2"
_CHUNK = 4_096  # v1: part of its bytes (each chunk is one MessagePack array)
_CHUNK_V2 = 512  # v2: only a reading size (the framing has no chunk headers)
_encoder = msgspec.msgpack.Encoder()
_encode = _encoder.encode


# --- v1 ------------------------------------------------------------------------------

def framed_chunks(pairs: Iterable[tuple[bytes, bytes]]) -> Iterator[bytes]:
    """The byte stream the v1 digest hashes, in chunks (replicated pairs only)."""
    iterator = iter(pairs)
    while chunk := list(islice(iterator, _CHUNK)):
        if chunk[-1][0][0] >= keys.REPLICATED_LIMIT:
            chunk = [pair for pair in chunk if pair[0][0] < keys.REPLICATED_LIMIT]
        yield _encode(chunk)


def new_hash() -> hashlib._Hash:
    """The v1 hash, seeded with its domain."""
    return hashlib.sha256(_DOMAIN)


def _digest_v1(pairs: Iterable[tuple[bytes, bytes]]) -> str:
    digest = new_hash()
    for chunk in framed_chunks(pairs):
        digest.update(chunk)
    return digest.hexdigest()


# --- v2 ------------------------------------------------------------------------------

def leaf_of(key: bytes) -> bytes:
    """The leaf ``key`` belongs to; also a valid cut point for key ranges (no leaf spans it)."""
    return key[:LEAF_BYTES]


def _array_header(count: int) -> int:
    """Bytes of the MessagePack array header msgspec writes for ``count`` items."""
    return 1 if count < 16 else 3 if count < 0x10000 else 5


def _leaf_key(pair: tuple[bytes, bytes]) -> bytes:
    return pair[0][:LEAF_BYTES]


def leaf_digests(pairs: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """``(leaf, 32-byte leaf digest)`` of every non-empty leaf of ``pairs`` (ascending key
    order; local keys from 0x80 skipped), in key order.

    Pairs are taken in chunks; a chunk inside one leaf (the common case) is framed and
    hashed with one call each, and a chunk that crosses leaves is cut by binary search.
    Chunks are framed into one reused buffer, small enough to stay in the heap: a fresh
    megabyte per chunk cost more in page faults than the hashing.
    """
    iterator = iter(pairs)
    current: bytes | None = None
    hasher = blake3()
    buffer = bytearray()
    encode_into = _encoder.encode_into
    while chunk := list(islice(iterator, _CHUNK_V2)):
        if chunk[-1][0][0] >= keys.REPLICATED_LIMIT:
            chunk = [pair for pair in chunk if pair[0][0] < keys.REPLICATED_LIMIT]
        start, count = 0, len(chunk)
        last = _leaf_key(chunk[-1]) if chunk else None
        while start < count:
            leaf = _leaf_key(chunk[start])
            if leaf != current:
                if current is not None:
                    yield current, hasher.digest()
                current, hasher = leaf, blake3()
            end = count if leaf == last else bisect_right(chunk, leaf, start, count,
                                                          key=_leaf_key)
            part = chunk if start == 0 and end == count else chunk[start:end]
            encode_into(part, buffer)
            view = memoryview(buffer)
            hasher.update(view[_array_header(len(part)):])
            view.release()
            start = end
    if current is not None:
        yield current, hasher.digest()


def combine(leaves: Iterable[tuple[bytes, bytes]]) -> str:
    """The v2 state digest from the leaf digests of every range, in key order."""
    root = blake3(DOMAIN_V2)
    for leaf in leaves:
        root.update(_encode(leaf))
    return root.hexdigest()


# --- either ---------------------------------------------------------------------------

def digest_sorted(pairs: Iterable[tuple[bytes, bytes]], version: int = DIGEST_VERSION) -> str:
    """Digest of ``pairs`` given in ascending key order (replicated keys only)."""
    if version == 2:
        return combine(leaf_digests(pairs))
    if version == 1:
        return _digest_v1(pairs)
    raise ValueError(f"state digest version {version} is not one of {DIGEST_VERSIONS}")


def digest_pairs(pairs: Iterable[tuple[bytes, bytes]], version: int = DIGEST_VERSION) -> str:
    """Digest of ``pairs`` in any order (sorted here first)."""
    return digest_sorted(sorted(pairs), version)
