"""Authenticated destination evidence: an HMAC every published record carries.

Seed 003 names authenticated external evidence as a release criterion. Every record a
destination writes for an attempt carries ``mac = HMAC-SHA256(route key, delayMessageId
NUL generation NUL attemptId)`` (hex) next to the attempt-id header. Evidence recovery and
``attempt resolve --evidence <reference>`` accept a record as proof of an attempt only
when its MAC verifies under the route's key: a record anyone could have written with the
right attempt-id header is not evidence.

The key is a secret of the route kept outside the Shard Log (``<home>/secrets``, see
``nereus.adapters.secrets``); this module only computes and compares.
"""

from __future__ import annotations

import hmac


def evidence_mac(key: bytes, delay_message_id: str, generation: int, attempt_id: str) -> str:
    """The MAC a destination record of this attempt carries (64 hex digits)."""
    text = f"{delay_message_id}\x00{generation}\x00{attempt_id}".encode()
    return hmac.digest(key, text, "sha256").hex()  # one-shot: no HMAC object per attempt


def mac_matches(key: bytes, delay_message_id: str, generation: int, attempt_id: str,
                found: str | bytes | None) -> bool:
    """Whether ``found`` (a record's MAC) is this attempt's, compared in constant time."""
    if found is None:
        return False
    text = found.decode(errors="replace") if isinstance(found, bytes) else found
    return hmac.compare_digest(evidence_mac(key, delay_message_id, generation, attempt_id),
                               text)
