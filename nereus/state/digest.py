"""The state digest: an order-independent hash over all replicated key/values.

Each replicated (key, value) pair is hashed with SHA-256 over a length-prefixed encoding
and the 256-bit hashes are summed modulo 2**256. A sum is independent of the order pairs
are visited, so a live shard, a checkpoint and an offline replay that hold the same
state give the same digest whatever their storage layout. Local runtime state (prefixes
from 0x80: claims, scheduler cursors) is excluded: it is not derived from the log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from nereus.state import keys

_MOD = 1 << 256


def pair_hash(key: bytes, value: bytes) -> int:
    h = hashlib.sha256(len(key).to_bytes(4, "big"))
    h.update(key)
    h.update(value)
    return int.from_bytes(h.digest(), "big")


def digest_pairs(pairs: Iterable[tuple[bytes, bytes]]) -> str:
    """Digest of the replicated pairs in ``pairs`` (others are skipped), as 64 hex digits."""
    total = 0
    for key, value in pairs:
        if key[0] < keys.REPLICATED_LIMIT:
            total = (total + pair_hash(key, value)) % _MOD
    return total.to_bytes(32, "big").hex()
