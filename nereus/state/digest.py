"""The state digest: one hash over all replicated key/values, in key order.

The replicated pairs (prefixes below 0x80) are hashed in ascending key order, each pair
MessagePack-framed. Key order is RocksDB's own iteration order, so a live shard, a
checkpoint and an offline replay that hold the same state give the same digest whatever
their files look like; in-memory state is sorted first (``digest_pairs``). Local runtime
state (prefixes from 0x80: claims, scheduler cursors) is excluded: it is not derived from
the log.

Two versions exist; ``DIGEST_VERSION`` is the one this build writes.

* **v1** — SHA-256 over one stream: the pairs in chunks of 4,096, each chunk a
  MessagePack array of ``[key, value]`` arrays. One pass, one process: on a 1M-message
  shard most of a checkpoint verify was this walk. Kept to verify checkpoints whose
  manifest is format 1 (``nereus.checkpoint.manifest``).
* **v2** — a hash of range digests, so key ranges can be digested by several processes
  and combined. The key space is cut into fixed **leaves**: all keys that share their
  first ``LEAF_BYTES`` bytes (a shorter key is a leaf of its own). A leaf's digest is
  BLAKE3 over its pairs, each framed as the MessagePack array ``[key, value]`` and
  concatenated (no chunk headers, so where a reader's chunks fall does not matter). The
  state digest is BLAKE3 over ``DOMAIN_V2`` and then, for each non-empty leaf in key
  order, the MessagePack array ``[leaf, leaf digest]``. Leaves are fixed by the keys
  alone, never by how many there are, so any cut of the key space at a leaf boundary
  (``leaf_of`` of any key is one) gives ranges whose leaf lists simply concatenate:
  ``combine(leaves(a..m) + leaves(m..z)) == digest``. BLAKE3 because it hashes about
  four times faster than SHA-256 here; SHA-256 stays for the files of a checkpoint.

Pairs are framed by msgspec and hashed by hashlib/blake3 (all C) in chunks, so the cost
per pair is the iteration itself; that is what makes verifying a large checkpoint fast.
Changing either version's bytes is a new digest version (and a checkpoint format bump).
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
