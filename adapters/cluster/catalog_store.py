"""A cluster's checkpoint catalog lives in its coordinator; the object store keeps the
files (seed 003: the coordinator holds "configuration, placement, leases, and checkpoint
catalog").

``CoordinatedCatalog`` is an ``ObjectStore`` that keeps every key under ``catalog/`` as a
coordinator record (``<cluster root>catalog/<route>/<partition>/<id>.json``) and passes
everything else to the object store. So taking, listing, restoring and deleting
checkpoints, the Recovery Set and the Recovery Floor work unchanged on every node, and a
catalog entry's conditional create is the coordinator's CAS (absent only): of two nodes
racing for one entry, exactly one wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from nereus.adapters.backends.objectstore.protocol import (
    ObjectInfo,
    ObjectMissing,
    ObjectStore,
    check_key,
)
from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.coordination.errors import KeyNotFound, UnexpectedVersionId
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST, prefix_range

CATALOG: Final = "catalog/"


class CoordinatedCatalog:
    """``objects`` with its ``catalog/`` keys in the coordinator."""

    def __init__(self, objects: ObjectStore, handle: ClusterHandle) -> None:
        self._objects = objects
        self._c = handle.coordinator
        self._root = handle.root
        self.description = f"{objects.description} (catalog in {handle.url})"

    @staticmethod
    def _ours(key: str) -> bool:
        return key.startswith(CATALOG)

    def _info(self, key: str, data: bytes) -> ObjectInfo:
        return ObjectInfo(key, len(data), hashlib.sha256(data).hexdigest())

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        if not self._ours(check_key(key)):
            return self._objects.put_bytes(key, data)
        self._c.put(self._root + key, data)
        return self._info(key, data)

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        if not self._ours(check_key(key)):
            return self._objects.put_file(key, path)
        return self.put_bytes(key, path.read_bytes())

    def create_if_absent(self, key: str, data: bytes) -> bool:
        if not self._ours(check_key(key)):
            return self._objects.create_if_absent(key, data)
        try:
            self._c.put(self._root + key, data,
                        expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST)
        except UnexpectedVersionId:
            return False
        return True

    def get_bytes(self, key: str) -> bytes:
        if not self._ours(key):
            return self._objects.get_bytes(key)
        try:
            return self._c.get(self._root + key).value
        except KeyNotFound:
            raise ObjectMissing(f"no catalog entry {key} in {self.description}") from None

    def get_file(self, key: str, dest: Path) -> ObjectInfo:
        if not self._ours(key):
            return self._objects.get_file(key, dest)
        data = self.get_bytes(key)
        dest.write_bytes(data)
        return self._info(key, data)

    def head(self, key: str) -> ObjectInfo | None:
        if not self._ours(key):
            return self._objects.head(key)
        try:
            return self._info(key, self._c.get(self._root + key).value)
        except KeyNotFound:
            return None

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        if not prefix.startswith(CATALOG) and not CATALOG.startswith(prefix):
            yield from self._objects.list(prefix)
            return
        if not prefix.startswith(CATALOG):  # a prefix above the catalog: both places
            yield from (info for info in self._objects.list(prefix)
                        if not self._ours(info.key))
        low, high = prefix_range(self._root + max(prefix, CATALOG, key=len))
        cut = len(self._root)
        for record in self._c.range_scan(low, high):
            yield self._info(record.key[cut:], record.value)

    def delete(self, key: str) -> None:
        if not self._ours(key):
            self._objects.delete(key)
            return
        self._c.delete(self._root + key)
