"""Where a cluster lives in Oxia (``oxia://HOST:PORT/[NAMESPACE/]CLUSTER``), and the key
encoding that makes Oxia's key order the Protocol's.

Oxia compares keys segment by segment on ``/`` (a key with fewer segments first), while the
Protocol's ranges are byte order. So no ``/`` of a Protocol key reaches Oxia:
``encode_key`` writes ``.`` as ``..`` and ``/`` as ``.~``, a prefix-free code that keeps the
order of every pair of characters, so encoded keys sort as the keys do and a prefix
encodes to a prefix. It is part of the on-coordinator format: changing it moves every
stored record. A cluster's records are under ``nereus/<cluster>/`` in the URL's namespace
(``default``), all on the one Oxia shard owning the xxh3 hash of the partition key
``nereus/<cluster>``, so Oxia's per-shard ``version_id`` is one counter for the cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from nereus.config.url_credentials import refuse_credentials
from nereus.errors import UsageError

DEFAULT_PORT: Final = 6648
DEFAULT_NAMESPACE: Final = "default"
CLUSTER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAMESPACE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_EXAMPLE: Final = ("oxia://HOST:PORT/CLUSTER or oxia://HOST:PORT/NAMESPACE/CLUSTER, e.g. "
                   "oxia://127.0.0.1:6648/prod")
_ESCAPE: Final = "."
_ENCODED: Final = {".": "..", "/": ".~"}
_DECODED: Final = {".": ".", "~": "/"}


@dataclass(frozen=True, slots=True)
class OxiaAddress:
    """One Oxia server to start from, the Oxia namespace, and the cluster in it."""

    host: str
    port: int
    namespace: str
    cluster: str

    @property
    def target(self) -> str:
        """``HOST:PORT`` as gRPC dials it (what error messages name)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The ``oxia://`` form of this address (the namespace only when not ``default``)."""
        where = self.cluster if self.namespace == DEFAULT_NAMESPACE \
            else f"{self.namespace}/{self.cluster}"
        return f"oxia://{self.target}/{where}"

    @property
    def root(self) -> str:
        """The Oxia key prefix of every record of the cluster."""
        return f"nereus/{self.cluster}/"

    @property
    def partition_key(self) -> str:
        """What picks the cluster's one Oxia shard (module docstring)."""
        return f"nereus/{self.cluster}"

    def oxia_key(self, key: str) -> str:
        """The Oxia key of a Protocol key of this cluster."""
        return self.root + encode_key(key)

    def key_of(self, oxia_key: str) -> str | None:
        """The Protocol key of an Oxia key; None for a key that is not the cluster's."""
        if not oxia_key.startswith(self.root):
            return None
        try:
            return decode_key(oxia_key[len(self.root):])
        except ValueError:
            return None


def parse_oxia_url(url: str) -> OxiaAddress:
    """``oxia://HOST[:PORT]/CLUSTER`` (port 6648 and namespace ``default`` if left out) or
    ``oxia://HOST[:PORT]/NAMESPACE/CLUSTER``; a ``UsageError`` says what is wrong with any
    other string (one with a user or password, shown redacted)."""
    refuse_credentials(url)
    parts = urlsplit(url)
    if parts.scheme != "oxia":
        raise UsageError(f"not an Oxia coordinator URL: {url!r}", hint=f"write {_EXAMPLE}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise UsageError(f"{url!r}: bad port: {exc}", hint=f"write {_EXAMPLE}") from exc
    if not parts.hostname:
        raise UsageError(f"{url!r} names no host", hint=f"write {_EXAMPLE}")
    segments = parts.path.removeprefix("/").split("/")
    namespace, cluster = ((DEFAULT_NAMESPACE, segments[0]) if len(segments) == 1
                          else (segments[0], segments[1]) if len(segments) == 2
                          else ("", ""))
    if (not NAMESPACE_NAME.fullmatch(namespace) or not CLUSTER_NAME.fullmatch(cluster)
            or parts.query or parts.fragment):
        raise UsageError(
            f"{url!r}: the path must be CLUSTER or NAMESPACE/CLUSTER, each one segment of "
            "letters, digits, '.', '_' or '-' (at most 100, not starting with a punctuation "
            "mark), with no query", hint=f"write {_EXAMPLE}")
    return OxiaAddress(parts.hostname, port, namespace, cluster)


def encode_key(key: str) -> str:
    """The Oxia form of a Protocol key: no ``/``, same order (module docstring)."""
    if _ESCAPE not in key and "/" not in key:
        return key
    return "".join(_ENCODED.get(char, char) for char in key)


def decode_key(encoded: str) -> str:
    """The Protocol key ``encode_key`` made ``encoded`` from (ValueError if it did not)."""
    if _ESCAPE not in encoded:
        if "/" in encoded:
            raise ValueError(f"not an encoded key (it has a '/'): {encoded!r}")
        return encoded
    out: list[str] = []
    chars = iter(encoded)
    for char in chars:
        if char == "/":
            raise ValueError(f"not an encoded key (it has a '/'): {encoded!r}")
        if char != _ESCAPE:
            out.append(char)
            continue
        following = next(chars, "")
        if following not in _DECODED:
            raise ValueError(f"not an encoded key ('.' then {following!r}): {encoded!r}")
        out.append(_DECODED[following])
    return "".join(out)
