"""The cluster's sealing key: route evidence keys are kept in the coordinator only sealed
under it (AES-256-GCM), so whoever reads the coordinator reads no evidence key.

Every node holds the same sealing key, given as a secret reference in its own
``nereus.toml`` (``[cluster] evidence_seal_key_file = PATH``, 0600, or
``evidence_seal_key_env``): 32 random bytes written as 64 hex digits (``openssl rand -hex
32``). The coordinator never sees it; a record names it only by ``key_id``, a fingerprint
that says which key sealed it (so a node with another key is told so, not just "does not
open"). While the sealing key itself is changed (``nereus cluster reseal-evidence-keys``) a
node may also hold the one before it (``evidence_seal_previous_key_file``/``_env``): it
opens a record sealed under either, and seals new ones under its current key. The
associated data binds a sealed key to its route and generation: a sealed key copied under
another route, or put back as another generation, does not open. It does not name the
cluster, so ``nereus cluster migrate`` may copy the records under another name.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nereus.config.node import ClusterSettings
from nereus.errors import ConfigError

SETTING: Final = "[cluster] evidence_seal_key_file"
PREVIOUS_SETTING: Final = "[cluster] evidence_seal_previous_key_file"
_NONCE: Final = 12  # AES-GCM's 96-bit nonce, random per seal
_HINT: Final = ("give every node the cluster's sealing key: [cluster] evidence_seal_key_file "
                "= PATH (64 hex digits, `openssl rand -hex 32 > PATH; chmod 600 PATH`), or "
                "evidence_seal_key_env = VAR")


def key_id_of(key: bytes) -> str:
    """A sealing key's fingerprint (what records, output and logs name; never the key)."""
    return hashlib.sha256(b"nereus evidence seal key id\x00" + key).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class SealKey:
    """The sealing key (never logged or shown; ``key_id`` is what a record names), and
    during a change of sealing key the one before it (``previous``: opens, never seals)."""

    key: bytes
    previous: bytes | None = None

    def __repr__(self) -> str:
        return f"SealKey(key_ids={self.key_ids})"

    @property
    def key_id(self) -> str:
        return key_id_of(self.key)

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The fingerprints of the keys held, the current one first."""
        return (self.key_id,) + (() if self.previous is None else (key_id_of(self.previous),))

    def opening(self, key_id: str) -> bytes | None:
        """The held key whose fingerprint is ``key_id``; None when this node has none."""
        return next((key for key in (self.key, self.previous)
                     if key is not None and key_id_of(key) == key_id), None)


def seal_key_of(cluster: ClusterSettings | None, home: Path | None) -> SealKey | None:
    """The sealing key this node's ``[cluster]`` refers to; None when it names none."""
    from nereus.adapters.home.secrets import read_secret

    if cluster is None:
        return None
    key = _key_bytes("evidence_seal_key", read_secret(
        "[cluster] evidence_seal_key", file=cluster.evidence_seal_key_file,
        env=cluster.evidence_seal_key_env, home=home))
    previous = _key_bytes("evidence_seal_previous_key", read_secret(
        "[cluster] evidence_seal_previous_key", file=cluster.evidence_seal_previous_key_file,
        env=cluster.evidence_seal_previous_key_env, home=home))
    if key is None:
        if previous is not None:
            raise ConfigError(f"{PREVIOUS_SETTING} is set without {SETTING}", hint=_HINT)
        return None
    return SealKey(key, None if previous == key else previous)


def _key_bytes(setting: str, text: str | None) -> bytes | None:
    """A sealing key's 32 bytes from its 64 hex digits; None when not given."""
    if text is None:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ConfigError(f"[cluster] {setting}: the sealing key is not 64 hex digits "
                          "(32 bytes)", hint=_HINT)
    return key


def _aad(route: str, generation: int) -> bytes:
    return f"nereus route evidence key\x00{route}\x00{generation}".encode()


def seal(seal_key: SealKey, evidence_key: bytes, *, route: str, generation: int) -> str:
    """``evidence_key`` sealed (base64 of nonce and ciphertext with its tag)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(_NONCE)
    sealed = AESGCM(seal_key.key).encrypt(nonce, evidence_key,
                                          _aad(route, generation))
    return base64.b64encode(nonce + sealed).decode()


def unseal(seal_key: SealKey, sealed: str, *, key_id: str, route: str,
           generation: int) -> bytes:
    """The evidence key ``sealed`` holds; ``ConfigError`` naming the setting when this
    node's sealing key is not the one that sealed it (or the record was tampered with)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    opener = seal_key.opening(key_id)
    if opener is None:
        raise ConfigError(f"route {route}'s evidence key is sealed under sealing key {key_id}; "
                          f"{_held(seal_key)}",
                          hint=f"give this node the cluster's sealing key in {SETTING} (the "
                               f"one before it, while it is changed, in {PREVIOUS_SETTING})")
    try:
        raw = base64.b64decode(sealed, validate=True)
        return AESGCM(opener).decrypt(raw[:_NONCE], raw[_NONCE:],
                                            _aad(route, generation))
    except (InvalidTag, ValueError):  # altered: a wrong tag, or not base64 at all
        raise ConfigError(f"route {route}'s sealed evidence key (generation {generation}) "
                          f"does not open with the key {SETTING} gives",
                          hint="the record was altered, or sealed for another route: "
                               "rotate it (`nereus cluster rotate-evidence-key`)") \
            from None


def _held(seal_key: SealKey) -> str:
    said = f"{SETTING} gives sealing key {seal_key.key_id}"
    if seal_key.previous is not None:
        said += f" and {PREVIOUS_SETTING} {seal_key.key_ids[1]}"
    return said


def require_seal_key(seal_key: SealKey | None, route: str) -> SealKey:
    """``seal_key``, or ``ConfigError`` naming the setting a node without it must set."""
    if seal_key is None:
        raise ConfigError(f"route {route}'s evidence key is sealed in the coordinator and "
                          f"this node has no sealing key ({SETTING} is not set)", hint=_HINT)
    return seal_key
