"""Taking and uploading a checkpoint of a shard's state.

Take: a RocksDB checkpoint (hard links, taken by the shard's owner between two applied
batches, so it is exactly the state at one applied position), then the manifest: every
file with size and BLAKE3 (read only if no earlier checkpoint of this process hashed
the same inode: ``hashed``), the digest recomputed from the checkpoint itself, the payload
objects the state references. Upload: files first, manifest last, then the catalog entry
with a conditional create; a checkpoint killed half-way has no catalog entry, so nothing
points at it (its orphaned files are harmless and can be swept). From feature level 2 a
checkpoint borrows the files its parent (the newest catalogued one) holds and uploads only
the others (``nereus.checkpoint.incremental``); a borrowed object gone from the store is
uploaded after all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.offline.checkpoint_catalog import catalog, manifest_of
from nereus.adapters.offline.log_replay import store_digest
from nereus.adapters.offline.parallel_verify import SMALL_CHECKPOINT, process_digest
from nereus.checkpoint.incremental import own_files, share_with_parent
from nereus.checkpoint.manifest import (
    FILE_HASH_OF_FORMAT,
    FORMAT_VERSION,
    INCREMENTAL_FORMAT_VERSION,
    MANIFEST_NAME,
    CatalogEntry,
    FileEntry,
    Manifest,
    catalog_key,
    checkpoint_prefix,
    encode_json,
)
from nereus.checkpoint.verify import file_hash
from nereus.errors import NereusError
from nereus.features import BASE_LEVEL
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import PayloadStage, decode_int, decode_value
from nereus.timespec import format_time_ms


def referenced_objects(store: ShardStore) -> list[str]:
    """Object-store keys of committed payloads the state references."""
    found = set()
    for _, raw in store.scan_prefix(keys.PAYLOAD):
        stage = decode_value(raw, PayloadStage)
        if stage.object_key:
            found.add(stage.object_key)
    return sorted(found)


def snapshot(store: ShardStore, staging: Path, checkpoint_id: str) -> Path:
    """The RocksDB checkpoint of ``store`` at ``staging/<id>`` (fast: hard links).

    The shard's owner calls this between two applied batches; everything slow (hashing,
    digest, upload) happens afterwards on the image, off the shard's thread.
    """
    directory = staging / checkpoint_id
    if directory.exists():
        shutil.rmtree(directory)
    staging.mkdir(parents=True, exist_ok=True)
    store.create_checkpoint(directory)
    return directory


def take_local(
    store: ShardStore,
    shard: ShardId,
    staging: Path,
    *,
    checkpoint_id: str,
    parent: str | None,
    now_ms: int,
    parent_manifest: Manifest | None = None,
    level: int = BASE_LEVEL,
) -> tuple[Path, Manifest]:
    """Checkpoint ``store`` into ``staging/<id>`` and write its manifest there."""
    directory = snapshot(store, staging, checkpoint_id)
    return directory, describe(directory, shard, checkpoint_id=checkpoint_id, parent=parent,
                               now_ms=now_ms, parent_manifest=parent_manifest, level=level)


def describe(directory: Path, shard: ShardId, *, checkpoint_id: str, parent: str | None,
             now_ms: int, parent_manifest: Manifest | None = None,
             level: int = BASE_LEVEL) -> Manifest:
    """Hash the image's files, recompute its digest, write ``manifest.json`` beside them;
    at ``level`` 2 on, the files ``parent_manifest`` lists are borrowed (format 3)."""
    with ShardStore.open(directory, read_only=True) as image:
        applied = image.applied_position()
        raw_records = image.get(keys.META_RECORDS)
        external = referenced_objects(image)
        digest = store_digest(image) if _small(directory) else None
    if digest is None:
        digest = _digest_in_a_child(directory)
    files = []
    for name in sorted(os.listdir(directory)):
        size, checksum = hashed(directory / name)
        files.append(FileEntry(name=name, size=size, blake3=checksum))
    files, format_version = share_with_parent(files, parent_manifest, level=level)
    manifest = Manifest(
        format_version=format_version, checkpoint_id=checkpoint_id, route=shard.route,
        partition=shard.partition,
        schema_version=keys.SCHEMA_VERSION, applied_position=applied,
        records_applied=0 if raw_records is None else decode_int(raw_records), digest=digest,
        files=files, external_objects=external, parent=parent,
        created_at=format_time_ms(now_ms), created_at_ms=now_ms,
    )
    (directory / MANIFEST_NAME).write_bytes(encode_json(manifest))
    return manifest


# (device, inode, size, mtime in ns) of a file hashed before -> its (size, BLAKE3). A
# snapshot hard-links the live database's table files, which RocksDB never changes once
# written: the next snapshot links the same inodes, so only files new since the last one
# are read. A file rewritten or replaced has another inode or mtime; ctime is left out,
# since each new hard link changes it.
_HASHED: dict[tuple[int, int, int, int], tuple[int, str]] = {}
_HASHED_LIMIT = 100_000  # entries (a shard's database has hundreds of files)


def hashed(path: Path) -> tuple[int, str]:
    """``file_hash`` of ``path`` in this build's format (BLAKE3), read only when no file of
    the same identity was hashed before in this process (``_HASHED``)."""
    stat = path.stat()
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    known = _HASHED.get(identity)
    if known is None:
        if len(_HASHED) >= _HASHED_LIMIT:
            _HASHED.clear()
        known = _HASHED[identity] = file_hash(path, None, FILE_HASH_OF_FORMAT[FORMAT_VERSION])
    return known


def _small(directory: Path) -> bool:
    """Whether the image is small enough to digest here: a child interpreter takes 0.1-0.3 s
    to start, more than a small image's whole digest."""
    total = 0
    for entry in os.scandir(directory):
        if entry.is_file():
            total += entry.stat().st_size
    return total < SMALL_CHECKPOINT


def _digest_in_a_child(directory: Path) -> str:
    """The image's state digest computed by one child interpreter
    (``parallel_verify.process_digest``), or here if it cannot run.

    The digest walks every pair of the state holding the GIL; in the engine's checkpointer
    thread it took the loop threads' interpreter away for seconds per checkpoint, and the
    larger the state the longer (about a fifth of a worker's time while a herd of 1,000,000
    drained, ``bench/scale.py``). One child, not one per core: a checkpoint is background
    work beside the loops.
    """
    try:
        return process_digest(directory, parts=1)
    except (RuntimeError, NereusError, OSError):
        with ShardStore.open(directory, read_only=True) as image:
            return store_digest(image)


def upload(objects: ObjectStore, directory: Path, manifest: Manifest,
           progress: Callable[[int], None] | None = None) -> CatalogEntry:
    """Its own files first (not those it borrows), manifest last, then the catalog entry
    (conditional create)."""
    prefix = checkpoint_prefix(manifest.route, manifest.partition, manifest.checkpoint_id)
    for entry in own_files(manifest):
        objects.put_file(prefix + entry.name, directory / entry.name)
        if progress is not None:
            progress(entry.size)
    objects.put_file(prefix + MANIFEST_NAME, directory / MANIFEST_NAME)
    catalog = CatalogEntry(
        checkpoint_id=manifest.checkpoint_id, route=manifest.route,
        partition=manifest.partition, applied_position=manifest.applied_position,
        digest=manifest.digest, manifest_key=prefix + MANIFEST_NAME,
        created_at=manifest.created_at, created_at_ms=manifest.created_at_ms,
        digest_version=manifest.digest_version,
    )
    key = catalog_key(manifest.route, manifest.partition, manifest.checkpoint_id)
    if not objects.create_if_absent(key, encode_json(catalog)):
        raise NereusError(f"catalog entry {key} already exists; checkpoint ids must be unique")
    return catalog


def keep_borrowed(objects: ObjectStore, directory: Path, manifest: Manifest) -> Manifest:
    """The manifest with every borrowed file whose object is gone (or another size) made
    its own again, so the upload carries it; ``manifest.json`` rewritten when one was."""
    gone = {f.name for f in manifest.files if f.checkpoint is not None
            and _size_in_store(objects, manifest.file_key(f)) != f.size}
    if not gone:
        return manifest
    files = [msgspec.structs.replace(f, checkpoint=None) if f.name in gone else f
             for f in manifest.files]
    version = (INCREMENTAL_FORMAT_VERSION if any(f.checkpoint for f in files)
               else FORMAT_VERSION)
    kept = msgspec.structs.replace(manifest, files=files, format_version=version)
    (directory / MANIFEST_NAME).write_bytes(encode_json(kept))
    return kept


def _size_in_store(objects: ObjectStore, key: str) -> int | None:
    info = objects.head(key)
    return None if info is None else info.size


def upload_checkpoint(objects: ObjectStore, directory: Path, manifest: Manifest,
                      progress: Callable[[int], None] | None = None) -> Taken:
    """Upload a described image (``keep_borrowed``, then ``upload``) and say what went."""
    manifest = keep_borrowed(objects, directory, manifest)
    entry = upload(objects, directory, manifest, progress)
    return Taken(entry, manifest, sum(f.size for f in manifest.files),
                 sum(f.size for f in own_files(manifest)))


def new_checkpoint_id(applied_position: int | None, token: str) -> str:
    """Sortable by position: ``cp-<applied position, 12 digits>-<token>``."""
    return f"cp-{(applied_position if applied_position is not None else 0):012d}-{token}"


@dataclass(frozen=True, slots=True)
class Taken:
    entry: CatalogEntry
    manifest: Manifest
    size_bytes: int  # the image's, borrowed files included
    uploaded_bytes: int  # what this checkpoint uploaded (its own files)


def checkpoint_now(
    store: ShardStore,
    shard: ShardId,
    objects: ObjectStore,
    staging: Path,
    *,
    token: str,
    now_ms: int,
    progress: Callable[[int], None] | None = None,
    level: int = BASE_LEVEL,
) -> Taken:
    """Take, upload and catalogue a checkpoint of ``store`` as it is now (incremental from
    ``level`` 2 on: ``describe``)."""
    existing = catalog(objects, shard)
    parent = existing[-1] if existing else None
    checkpoint_id = new_checkpoint_id(store.applied_position(), token)
    directory, manifest = take_local(
        store, shard, staging, checkpoint_id=checkpoint_id,
        parent=parent.checkpoint_id if parent else None, now_ms=now_ms,
        parent_manifest=manifest_of(objects, parent) if parent else None, level=level)
    try:
        return upload_checkpoint(objects, directory, manifest, progress)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class CheckpointTaken(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``checkpoint create`` document (offline, or the engine's ``/v1/checkpoints``)."""

    checkpoint_id: str
    shard: str
    applied_position: int | None
    digest: str
    parent: str | None
    files: int
    size_bytes: int
    uploaded_bytes: int  # its own files (an incremental checkpoint borrows the others)
    created_at: str
    object_store: str
    manifest_key: str


def taken_view(taken: Taken, objects: ObjectStore) -> CheckpointTaken:
    return CheckpointTaken(
        checkpoint_id=taken.entry.checkpoint_id,
        shard=f"{taken.entry.route}/{taken.entry.partition}",
        applied_position=taken.entry.applied_position, digest=taken.entry.digest,
        parent=taken.manifest.parent, files=len(taken.manifest.files),
        size_bytes=taken.size_bytes, uploaded_bytes=taken.uploaded_bytes,
        created_at=taken.entry.created_at,
        object_store=objects.description, manifest_key=taken.entry.manifest_key)
