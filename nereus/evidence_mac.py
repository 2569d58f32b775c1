"""Authenticated destination evidence: an HMAC every published record carries.

Seed 003 names authenticated external evidence as a release criterion. Every record a
destination writes for an attempt carries ``mac = HMAC-SHA256(route key, delayMessageId
NUL generation NUL attemptId)`` (hex) next to the attempt-id header. Evidence recovery and
``attempt resolve --evidence <reference>`` accept a record as proof of an attempt only
when its MAC verifies under the route's key: a record anyone could have written with the
right attempt-id header is not evidence.

The key is a secret of the route kept outside the Shard Log (``<home>/secrets``, see
``nereus.adapters.home.route_secrets``); this module only computes and compares.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

_BLOCK = 64  # SHA-256's block size (RFC 2104's B)
_KEYED: dict[bytes, tuple[Any, Any]] = {}  # key -> SHA-256 states over key^ipad, key^opad


def _keyed(key: bytes) -> tuple[Any, Any]:
    """The inner and outer SHA-256 states of HMAC under ``key`` after its padded key block
    (RFC 2104), computed once per key: each MAC then copies them instead of keying an HMAC
    again (about 2 us a MAC instead of 5.5; a route has one key, a process a few)."""
    pads = _KEYED.get(key)
    if pads is None:
        block = (hashlib.sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK,
                                                                                b"\0")
        pads = (hashlib.sha256(bytes(b ^ 0x36 for b in block)),
                hashlib.sha256(bytes(b ^ 0x5C for b in block)))
        if len(_KEYED) >= 64:
            _KEYED.clear()
        _KEYED[key] = pads
    return pads


def evidence_mac(key: bytes, delay_message_id: str, generation: int, attempt_id: str) -> str:
    """The MAC a destination record of this attempt carries (64 hex digits):
    HMAC-SHA256, exactly what ``hmac.new(key, text, sha256)`` gives."""
    text = f"{delay_message_id}\x00{generation}\x00{attempt_id}".encode()
    ipad, opad = _keyed(key)
    inner = ipad.copy()
    inner.update(text)
    outer = opad.copy()
    outer.update(inner.digest())
    mac: str = outer.hexdigest()
    return mac


def mac_matches(key: bytes, delay_message_id: str, generation: int, attempt_id: str,
                found: str | bytes | None) -> bool:
    """Whether ``found`` (a record's MAC) is this attempt's, compared in constant time."""
    if found is None:
        return False
    text = found.decode(errors="replace") if isinstance(found, bytes) else found
    return hmac.compare_digest(evidence_mac(key, delay_message_id, generation, attempt_id),
                               text)
