"""The ObjectStore Protocol: where checkpoints and large payloads live.

Every object carries its SHA-256 (computed by the writer, stored beside the object) and
every read verifies it, so a damaged or truncated object is an error naming its key, never
silently returned. ``create_if_absent`` is the conditional create catalog entries use: of
two writers racing for one key, exactly one wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nereus.errors import NereusError


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    sha256: str | None  # None when the store does not know it (an object we did not write)


class ObjectCorrupt(NereusError):
    """An object's bytes do not match the SHA-256 recorded when it was written."""


class ObjectMissing(NereusError):
    """No object under that key."""

    exit_code = NereusError.exit_code


class ObjectStore(Protocol):
    description: str

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo: ...

    def put_file(self, key: str, path: Path) -> ObjectInfo: ...

    def create_if_absent(self, key: str, data: bytes) -> bool:
        """Write ``data`` under ``key`` only if nothing is there; True if this call won."""
        ...

    def get_bytes(self, key: str) -> bytes: ...

    def get_file(self, key: str, dest: Path) -> ObjectInfo: ...

    def head(self, key: str) -> ObjectInfo | None: ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]: ...

    def delete(self, key: str) -> None: ...


def check_key(key: str) -> str:
    """Keys are relative, slash-separated, with no empty, '.' or '..' parts."""
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") for p in parts) or key.startswith("/"):
        from nereus.errors import UsageError

        raise UsageError(f"invalid object key {key!r}")
    return key
