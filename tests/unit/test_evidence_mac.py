"""The evidence MAC is HMAC-SHA256 over the attempt's identity, whatever the key length."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from nereus.evidence_mac import evidence_mac, mac_matches


@pytest.mark.parametrize("key", [b"", b"k", b"k" * 32, b"\xff" * 64, b"\x01" * 65,
                                 bytes(range(200))])
def test_the_mac_is_rfc_2104_hmac_sha256(key: bytes) -> None:
    """Keys shorter than, equal to and longer than SHA-256's block (hashed first) give the
    MAC the standard library's ``hmac.new`` gives, on a first and a cached second call."""
    for attempt_id in ("a-1", "a-2"):
        expected = hmac.new(key, f"m\x007\x00{attempt_id}".encode(), hashlib.sha256).hexdigest()
        assert evidence_mac(key, "m", 7, attempt_id) == expected
        assert mac_matches(key, "m", 7, attempt_id, expected.encode())
    assert not mac_matches(key, "m", 8, "a-1", evidence_mac(key, "m", 7, "a-1"))
