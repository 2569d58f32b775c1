"""Authenticated destination evidence: an HMAC every published record carries.

Seed 003 names authenticated external evidence as a release criterion. Every record a
destination writes for an attempt carries ``mac = HMAC-SHA256(route key, delayMessageId
NUL generation NUL attemptId)`` (hex) next to the attempt-id header. Evidence recovery and
``attempt resolve --evidence <reference>`` accept a record as proof of an attempt only
when its MAC verifies under the route's key: a record anyone could have written with the
right attempt-id header is not evidence.

The key is a secret of the route kept outside the Shard Log (``<home>/secrets``, see
``nereus.adapters.home.route_secrets``); this module only computes and compares. A
cluster's route key can be rotated (``nereus cluster rotate-evidence-key``): records are
then signed with the new key, and a record signed with the previous one still verifies
until the rotation's grace ends (``EvidenceKeys``, ``ExpectedMac``).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, TypeAlias

# what a record's MAC must be: one MAC, or any of several (the current and the previous
# key's during a rotation's grace)
ExpectedMac: TypeAlias = str | tuple[str, ...]

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



def mac_accepted(found: str | bytes | None, expected: ExpectedMac) -> bool:
    """Whether ``found`` is one of the ``expected`` MACs (each compared in constant time)."""
    if found is None:
        return False
    text = found.decode(errors="replace") if isinstance(found, bytes) else found
    macs = (expected,) if isinstance(expected, str) else expected
    return any([hmac.compare_digest(mac, text) for mac in macs])


@dataclass(frozen=True, slots=True)
class EvidenceKeys:
    """A route's evidence keys: ``current`` signs; ``previous`` (the key before the last
    rotation) still verifies until ``previous_until_ms``."""

    current: bytes
    generation: int = 1
    previous: bytes | None = None
    previous_until_ms: int = 0

    def __repr__(self) -> str:
        return f"EvidenceKeys(generation={self.generation})"

    def verifying(self, now_ms: int) -> tuple[bytes, ...]:
        """The keys a record's MAC may be made with at ``now_ms``."""
        if self.previous is None or now_ms >= self.previous_until_ms:
            return (self.current,)
        return (self.current, self.previous)

    def expected(self, now_ms: int, delay_message_id: str, generation: int,
                 attempt_id: str) -> ExpectedMac:
        """The MAC(s) a record of this attempt may carry at ``now_ms``."""
        macs = tuple(evidence_mac(key, delay_message_id, generation, attempt_id)
                     for key in self.verifying(now_ms))
        return macs[0] if len(macs) == 1 else macs


NO_KEYS = EvidenceKeys(current=b"")  # a shard that was given no key (tests, tools)
