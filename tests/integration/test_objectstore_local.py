"""The local-directory object store passes the ObjectStore contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.errors import UsageError
from tests.integration.objectstore_contract import ObjectStoreContract


class TestLocalObjectStore(ObjectStoreContract):
    def make_store(self, tmp_path: Path) -> ObjectStore:
        return LocalObjectStore(tmp_path / "objects")

    def corrupt(self, store: ObjectStore, key: str) -> None:
        assert isinstance(store, LocalObjectStore)
        path = store.root / key
        data = bytearray(path.read_bytes())
        data[0] ^= 0xFF
        path.write_bytes(bytes(data))


def test_keys_cannot_escape_the_root(tmp_path: Path) -> None:
    """Keys with '..' or absolute paths are refused."""
    store = LocalObjectStore(tmp_path / "objects")
    for key in ("../x", "/etc/passwd", "a//b", ""):
        with pytest.raises(UsageError):
            store.put_bytes(key, b"x")


def test_interrupted_writes_leave_no_object(tmp_path: Path) -> None:
    """A temporary file from an interrupted write is not listed as an object."""
    store = LocalObjectStore(tmp_path / "objects")
    (store.root / "cp").mkdir()
    (store.root / "cp" / ".tmp-abc").write_bytes(b"partial")
    assert list(store.list("")) == []
