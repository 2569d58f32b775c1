"""Incremental checkpoints against a real shard database, in the file store and in S3.

Take a full checkpoint, change 1 % of the shard, take an incremental one: it uploads only
the new files and borrows the rest; a restore from it equals the live digest; pruning its
parent keeps the borrowed files, so it still restores; a shared file damaged or gone is
refused by verify naming it. Below feature level 2 every checkpoint stays full (format 2).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.backends.objectstore.s3 import S3ObjectStore
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.checkpoint_catalog import (
    catalog,
    delete_checkpoint,
    manifest_of,
    recovery_floor,
)
from nereus.adapters.offline.checkpoint_restore import restore_into, verify_entry
from nereus.adapters.offline.checkpoint_take import Taken, checkpoint_now
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.checkpoint.verify import store_digest
from nereus.records import Schedule, encode
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from tests.integration.services import S3Service, s3_service

__all__ = ["s3_service"]

SHARD = ShardId("default", 0)
MESSAGES = 2_000


class Shard:
    """A live shard database fed from a file log, checkpointed into ``objects``."""

    def __init__(self, root: Path, objects: ObjectStore) -> None:
        self.root, self.objects = root, objects
        self.log = FileShardLog(root / "log", create=True)
        identity = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
        self.store = ShardStore.open(root / "db", identity=identity, create=True)
        self.scheduled = 0

    def schedule(self, count: int) -> None:
        first, self.scheduled = self.scheduled, self.scheduled + count
        self.log.append([encode(Schedule(
            command_id=f"c{n}", delay_message_id=f"m{n}", lane="local", payload=b"x" * 200,
            deliver_at_ms=10_000 + n, action_at_ms=10_000 + n)) for n in range(first,
                                                                                self.scheduled)])
        ShardRunner(self.store, self.log).run_until_caught_up()

    def checkpoint(self, level: int = 2) -> Taken:
        return checkpoint_now(self.store, SHARD, self.objects, self.root / "staging",
                              token=uuid.uuid4().hex[:8], now_ms=1_700_000_000_000,
                              level=level)

    def close(self) -> None:
        self.store.close()
        self.log.close()


@pytest.fixture(params=["files", "s3"])
def shard(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shard]:
    """A shard of MESSAGES messages, checkpointed into a local directory or a fresh bucket."""
    if request.param == "files":
        objects: ObjectStore = LocalObjectStore(tmp_path / "objects")
    else:
        service: S3Service = request.getfixturevalue("s3_service")
        endpoint = service.require()
        bucket = f"nereus-test-{uuid.uuid4().hex[:16]}"
        objects = S3ObjectStore(bucket, prefix="cp", endpoint_url=endpoint.endpoint_url,
                                region=endpoint.region, access_key_id=endpoint.access_key_id,
                                secret_access_key=endpoint.secret_access_key,
                                create_bucket=True)
        request.addfinalizer(lambda: endpoint.remove_bucket(bucket))
    live = Shard(tmp_path, objects)
    live.schedule(MESSAGES)
    live.store.compact()
    yield live
    live.close()


def restored_digest(shard: Shard, taken: Taken, name: str) -> str:
    target = shard.root / name
    report = restore_into(shard.objects, taken.entry, target)
    assert report.ok, report.document()
    with ShardStore.open(target, read_only=True) as image:
        return store_digest(image)


def test_an_incremental_checkpoint_uploads_only_new_files_and_restores_after_its_parent_goes(
        shard: Shard) -> None:
    """After 1 % changed the incremental checkpoint uploads under a tenth of the full one's
    bytes, names every file it needs (format 3), restores to the live digest, and still
    verifies and restores once its parent is pruned (the shared files are kept)."""
    full = shard.checkpoint()
    assert full.manifest.format_version == 2 and full.uploaded_bytes == full.size_bytes
    shard.schedule(MESSAGES // 100)
    incremental = shard.checkpoint()
    manifest = incremental.manifest
    assert manifest.format_version == 3 and manifest.parent == full.entry.checkpoint_id
    borrowed = [f for f in manifest.files if f.checkpoint == full.entry.checkpoint_id]
    assert borrowed and incremental.uploaded_bytes * 10 <= full.uploaded_bytes
    live = store_digest(shard.store)
    assert incremental.entry.digest == live
    assert restored_digest(shard, incremental, "restored") == live
    floor = recovery_floor(shard.objects, SHARD, keep=1)
    delete_checkpoint(shard.objects, full.entry, floor)
    assert [e.checkpoint_id for e in catalog(shard.objects, SHARD)] == [
        incremental.entry.checkpoint_id]
    assert all(shard.objects.head(manifest.file_key(f)) is not None for f in borrowed)
    assert verify_entry(shard.objects, incremental.entry).ok
    assert restored_digest(shard, incremental, "after-prune") == live


def test_the_next_checkpoint_borrows_from_the_holder_and_pruning_frees_unnamed_files(
        shard: Shard) -> None:
    """A chain of three: the third borrows from the first directly; deleting the first two
    removes only the objects the third does not name, and the third restores."""
    first = shard.checkpoint()
    shard.schedule(20)
    second = shard.checkpoint()
    shard.schedule(20)
    third = shard.checkpoint()
    holders = {f.checkpoint for f in third.manifest.files}
    assert first.entry.checkpoint_id in holders
    floor = recovery_floor(shard.objects, SHARD, keep=1)
    for entry in (first.entry, second.entry):
        delete_checkpoint(shard.objects, entry, floor)
    kept = {info.key for info in shard.objects.list("checkpoints/")}
    assert kept == set(third.manifest.object_keys())
    assert restored_digest(shard, third, "restored") == store_digest(shard.store)


def test_a_damaged_or_missing_shared_file_is_refused_by_verify_naming_it(
        shard: Shard) -> None:
    """Verify of an incremental checkpoint checks the files it borrows: one gone fails the
    download naming its key, one damaged fails the checksum naming the file."""
    full = shard.checkpoint()
    shard.schedule(20)
    incremental = shard.checkpoint()
    shared = next(f for f in incremental.manifest.files if f.checkpoint is not None)
    key = incremental.manifest.file_key(shared)
    data = shard.objects.get_bytes(key)
    shard.objects.delete(key)
    shard.objects.put_bytes(key, bytes([data[0] ^ 0xFF]) + data[1:])
    damaged = verify_entry(shard.objects, incremental.entry)
    failed = [c for c in damaged.checks if not c.ok and not c.skipped]
    assert failed and failed[0].name == "file_checksums" and shared.name in failed[0].detail
    shard.objects.delete(key)
    gone = verify_entry(shard.objects, incremental.entry)
    (failed_check,) = [c for c in gone.checks if not c.ok]
    assert failed_check.name == "download" and key in failed_check.detail
    assert not verify_entry(shard.objects, full.entry).ok  # the object is the parent's own


def test_below_level_two_every_checkpoint_is_full(tmp_path: Path) -> None:
    """At feature level 1 a checkpoint after a small change borrows nothing: format 2, all
    its files uploaded, as 0.1.0 writes it."""
    live = Shard(tmp_path, LocalObjectStore(tmp_path / "objects"))
    try:
        live.schedule(200)
        live.checkpoint(level=1)
        live.schedule(2)
        again = live.checkpoint(level=1)
        assert again.manifest.format_version == 2
        assert all(f.checkpoint is None for f in again.manifest.files)
        assert again.uploaded_bytes == again.size_bytes
        parent = manifest_of(live.objects, catalog(live.objects, SHARD)[0])
        assert {f.name for f in parent.files} & {f.name for f in again.manifest.files}
    finally:
        live.close()


def test_a_borrowed_object_gone_from_the_store_is_uploaded_again(tmp_path: Path) -> None:
    """When an object the parent's manifest names is gone, the next checkpoint does not
    borrow it but uploads the file itself, and restores to the live digest."""
    live = Shard(tmp_path, LocalObjectStore(tmp_path / "objects"))
    try:
        live.schedule(200)
        parent = live.checkpoint()
        live.schedule(2)
        table = next(f for f in parent.manifest.files if f.name.endswith(".sst"))
        live.objects.delete(parent.manifest.file_key(table))
        again = live.checkpoint()
        (entry,) = [f for f in again.manifest.files if f.name == table.name]
        assert entry.checkpoint is None
        assert live.objects.head(again.manifest.file_key(entry)) is not None
        assert restored_digest(live, again, "restored") == store_digest(live.store)
    finally:
        live.close()
