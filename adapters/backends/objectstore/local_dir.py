"""The embedded default object store: a directory (``<home>/objects/``).

Objects are written to a temporary file, fsynced and renamed into place (the directory is
fsynced too), so a crash never leaves a half-written object under its key. The SHA-256 of
each object is kept in ``.sha256/<key>`` beside the tree and verified on every read.
``create_if_absent`` uses ``link(2)``, which fails if the name exists: atomic, one winner.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nereus.adapters.backends.objectstore.protocol import (
    ObjectCorrupt,
    ObjectInfo,
    ObjectMissing,
    check_key,
)
from nereus.adapters.home.durable_files import fsync_dir

_CHUNK = 1 << 20
_META = ".sha256"


def file_sha256(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


class LocalObjectStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.description = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _meta(self, key: str) -> Path:
        return self.root / _META / check_key(key)

    def _write_atomically(self, target: Path, data_source: Path | bytes, *,
                          exclusive: bool = False) -> bool:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                if isinstance(data_source, bytes):
                    out.write(data_source)
                else:
                    with open(data_source, "rb") as src:
                        while chunk := src.read(_CHUNK):
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if exclusive:
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    return False
                finally:
                    os.unlink(tmp)
            else:
                os.replace(tmp, target)
            fsync_dir(target.parent)
            return True
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _record(self, key: str, sha: str) -> None:
        self._write_atomically(self._meta(key), sha.encode())

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        sha = hashlib.sha256(data).hexdigest()
        self._record(key, sha)
        self._write_atomically(self._path(key), data)
        return ObjectInfo(key, len(data), sha)

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        size, sha = file_sha256(path)
        self._record(key, sha)
        self._write_atomically(self._path(key), path)
        return ObjectInfo(key, size, sha)

    def create_if_absent(self, key: str, data: bytes) -> bool:
        sha = hashlib.sha256(data).hexdigest()
        if self._path(key).exists():
            return False
        won = self._write_atomically(self._path(key), data, exclusive=True)
        if won:
            self._record(key, sha)
        return won

    def _expected(self, key: str) -> str | None:
        try:
            return self._meta(key).read_text().strip() or None
        except FileNotFoundError:
            return None

    def get_bytes(self, key: str) -> bytes:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(f"no object {key} in {self.description}") from None
        expected = self._expected(key)
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            raise ObjectCorrupt(f"object {key} in {self.description} does not match its "
                                f"recorded SHA-256 {expected[:16]}..")
        return data

    def get_file(self, key: str, dest: Path) -> ObjectInfo:
        source = self._path(key)
        if not source.exists():
            raise ObjectMissing(f"no object {key} in {self.description}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        with open(source, "rb") as src, open(dest, "wb") as out:
            while chunk := src.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        sha = digest.hexdigest()
        expected = self._expected(key)
        if expected is not None and sha != expected:
            raise ObjectCorrupt(f"object {key} in {self.description} does not match its "
                                f"recorded SHA-256 {expected[:16]}..")
        return ObjectInfo(key, size, sha)

    def head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        if not path.is_file():
            return None
        return ObjectInfo(key, path.stat().st_size, self._expected(key))

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base = self.root
        found = []
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, base)
            if rel_dir == _META or rel_dir.startswith(_META + os.sep):
                dirnames[:] = []
                continue
            dirnames[:] = [d for d in dirnames if d != _META]
            for name in filenames:
                if name.startswith(".tmp-"):
                    continue
                key = name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}"
                if key.startswith(prefix):
                    found.append(key)
        for key in sorted(found):
            info = self.head(key)
            if info is not None:
                yield info

    def delete(self, key: str) -> None:
        for path in (self._path(key), self._meta(key)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
