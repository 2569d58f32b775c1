"""The contract every ObjectStore backend passes (local directory, S3)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.protocol import ObjectCorrupt, ObjectMissing, ObjectStore


class ObjectStoreContract:
    def make_store(self, tmp_path: Path) -> ObjectStore:
        raise NotImplementedError

    def corrupt(self, store: ObjectStore, key: str) -> None:
        """Damage the stored bytes of ``key`` behind the store's back."""
        raise NotImplementedError

    def test_put_and_get_bytes_round_trip(self, tmp_path: Path) -> None:
        """Bytes written under a key come back identical, with size and SHA-256."""
        store = self.make_store(tmp_path)
        info = store.put_bytes("a/b/one.bin", b"hello")
        assert (info.size, info.sha256) == (5, hashlib.sha256(b"hello").hexdigest())
        assert store.get_bytes("a/b/one.bin") == b"hello"
        head = store.head("a/b/one.bin")
        assert head is not None and head.size == 5 and head.sha256 == info.sha256

    def test_put_file_and_get_file_large(self, tmp_path: Path) -> None:
        """A file larger than the multipart threshold round-trips byte for byte."""
        store = self.make_store(tmp_path)
        source = tmp_path / "big.bin"
        source.write_bytes(os.urandom(9 << 20))
        info = store.put_file("files/big.bin", source)
        dest = tmp_path / "back.bin"
        got = store.get_file("files/big.bin", dest)
        assert got.sha256 == info.sha256 and dest.read_bytes() == source.read_bytes()

    def test_missing_objects(self, tmp_path: Path) -> None:
        """A missing key: head is None, reads raise ObjectMissing naming the key."""
        store = self.make_store(tmp_path)
        assert store.head("nope/x") is None
        with pytest.raises(ObjectMissing, match="nope/x"):
            store.get_bytes("nope/x")
        with pytest.raises(ObjectMissing):
            store.get_file("nope/x", tmp_path / "x")

    def test_list_by_prefix_and_delete(self, tmp_path: Path) -> None:
        """list returns the keys under a prefix in order; delete removes one."""
        store = self.make_store(tmp_path)
        for key in ("cp/2/b", "cp/1/a", "other/c"):
            store.put_bytes(key, key.encode())
        assert [i.key for i in store.list("cp/")] == ["cp/1/a", "cp/2/b"]
        store.delete("cp/1/a")
        assert [i.key for i in store.list("cp/")] == ["cp/2/b"]
        store.delete("cp/1/a")  # deleting twice is fine

    def test_conditional_create_has_one_winner(self, tmp_path: Path) -> None:
        """create_if_absent: the first writer wins, later ones get False, the value stays."""
        store = self.make_store(tmp_path)
        assert store.create_if_absent("catalog/x", b"first") is True
        assert store.create_if_absent("catalog/x", b"second") is False
        assert store.get_bytes("catalog/x") == b"first"

    def test_racing_conditional_creates(self, tmp_path: Path) -> None:
        """Eight threads racing to create one key: exactly one wins."""
        store = self.make_store(tmp_path)
        wins: list[bool] = []
        barrier = threading.Barrier(8)

        def race(n: int) -> None:
            barrier.wait()
            wins.append(store.create_if_absent("catalog/race", f"writer {n}".encode()))

        threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert wins.count(True) == 1

    def test_damaged_object_is_detected_on_read(self, tmp_path: Path) -> None:
        """Bytes changed behind the store's back fail the checksum and name the key."""
        store = self.make_store(tmp_path)
        store.put_bytes("d/obj", b"x" * 1000)
        self.corrupt(store, "d/obj")
        with pytest.raises(ObjectCorrupt, match="d/obj"):
            store.get_bytes("d/obj")
        with pytest.raises(ObjectCorrupt):
            store.get_file("d/obj", tmp_path / "out")
