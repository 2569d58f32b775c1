"""Taking, uploading, finding and restoring checkpoints; the Recovery Set and its Floor.

Take: a RocksDB checkpoint (hard links, taken by the shard's owner between two applied
batches, so it is exactly the state at one applied position), then the manifest: every
file with size and SHA-256, the digest recomputed from the checkpoint itself, the payload
objects the state references. Upload: files first, manifest last, then the catalog entry
with a conditional create; a checkpoint killed half-way has no catalog entry, so nothing
points at it (its orphaned files are harmless and can be swept).

Recovery Set: the newest ``keep`` catalogued checkpoints of a shard, the only ones recovery
may use. Recovery Floor: the oldest Shard Log position any member still needs (its applied
position + 1) and every external object any member references. Log retention and payload
collection must stay below the floor (``check_floor``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from nereus.adapters.objectstore.protocol import ObjectStore
from nereus.adapters.parallel_verify import verify_parallel
from nereus.adapters.replay import store_digest
from nereus.checkpoint.manifest import (
    MANIFEST_NAME,
    CatalogEntry,
    FileEntry,
    Manifest,
    catalog_key,
    catalog_prefix,
    checkpoint_prefix,
    encode_json,
)
from nereus.checkpoint.verify import VerifyReport, file_sha256
from nereus.errors import NereusError, NotFound
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import PayloadStage, decode_int, decode_value
from nereus.timespec import format_time_ms


class FloorViolation(NereusError):
    """An action would delete what a Recovery Set member still needs."""


@dataclass(frozen=True, slots=True)
class Floor:
    shard: str
    position: int  # the oldest log position a member still needs
    external_objects: frozenset[str]
    members: tuple[CatalogEntry, ...]


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
) -> tuple[Path, Manifest]:
    """Checkpoint ``store`` into ``staging/<id>`` and write its manifest there."""
    directory = snapshot(store, staging, checkpoint_id)
    return directory, describe(directory, shard, checkpoint_id=checkpoint_id, parent=parent,
                               now_ms=now_ms)


def describe(directory: Path, shard: ShardId, *, checkpoint_id: str, parent: str | None,
             now_ms: int) -> Manifest:
    """Hash the image's files, recompute its digest, write ``manifest.json`` beside them."""
    with ShardStore.open(directory, read_only=True) as image:
        applied = image.applied_position()
        raw_records = image.get(keys.META_RECORDS)
        digest = store_digest(image)
        external = referenced_objects(image)
    files = []
    for name in sorted(os.listdir(directory)):
        size, sha = file_sha256(directory / name)
        files.append(FileEntry(name=name, size=size, sha256=sha))
    manifest = Manifest(
        checkpoint_id=checkpoint_id, route=shard.route, partition=shard.partition,
        schema_version=keys.SCHEMA_VERSION, applied_position=applied,
        records_applied=0 if raw_records is None else decode_int(raw_records), digest=digest,
        files=files, external_objects=external, parent=parent,
        created_at=format_time_ms(now_ms), created_at_ms=now_ms,
    )
    (directory / MANIFEST_NAME).write_bytes(encode_json(manifest))
    return manifest


def upload(objects: ObjectStore, directory: Path, manifest: Manifest,
           progress: Callable[[int], None] | None = None) -> CatalogEntry:
    """Files first, manifest last, then the catalog entry (conditional create)."""
    prefix = checkpoint_prefix(manifest.route, manifest.partition, manifest.checkpoint_id)
    for entry in manifest.files:
        objects.put_file(prefix + entry.name, directory / entry.name)
        if progress is not None:
            progress(entry.size)
    objects.put_file(prefix + MANIFEST_NAME, directory / MANIFEST_NAME)
    catalog = CatalogEntry(
        checkpoint_id=manifest.checkpoint_id, route=manifest.route,
        partition=manifest.partition, applied_position=manifest.applied_position,
        digest=manifest.digest, manifest_key=prefix + MANIFEST_NAME,
        created_at=manifest.created_at, created_at_ms=manifest.created_at_ms,
    )
    key = catalog_key(manifest.route, manifest.partition, manifest.checkpoint_id)
    if not objects.create_if_absent(key, encode_json(catalog)):
        raise NereusError(f"catalog entry {key} already exists; checkpoint ids must be unique")
    return catalog


def catalog(objects: ObjectStore, shard: ShardId) -> list[CatalogEntry]:
    """Catalogued checkpoints of ``shard``, oldest first (by applied position, then time)."""
    entries = []
    for info in objects.list(catalog_prefix(shard.route, shard.partition)):
        if info.key.endswith(".json"):
            entries.append(msgspec.json.decode(objects.get_bytes(info.key), type=CatalogEntry))
    entries.sort(key=lambda e: (-1 if e.applied_position is None else e.applied_position,
                                e.created_at_ms))
    return entries


def find(objects: ObjectStore, checkpoint_id: str) -> CatalogEntry:
    for info in objects.list("catalog/"):
        if info.key.endswith(f"/{checkpoint_id}.json"):
            return msgspec.json.decode(objects.get_bytes(info.key), type=CatalogEntry)
    raise NotFound(f"no checkpoint {checkpoint_id} in the catalog of {objects.description}",
                   hint="`nereus checkpoint list SHARD` lists them")


def download(objects: ObjectStore, entry: CatalogEntry, dest: Path,
             progress: Callable[[int], None] | None = None) -> Path:
    """Fetch every file of a checkpoint (checksums verified by the store) into ``dest``."""
    prefix = entry.manifest_key[: -len(MANIFEST_NAME)]
    dest.mkdir(parents=True, exist_ok=True)
    objects.get_file(entry.manifest_key, dest / MANIFEST_NAME)
    manifest = msgspec.json.decode((dest / MANIFEST_NAME).read_bytes(), type=Manifest)
    for file in manifest.files:
        objects.get_file(prefix + file.name, dest / file.name)
        if progress is not None:
            progress(file.size)
    return dest


def verify_entry(objects: ObjectStore, entry: CatalogEntry,
                 progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Download a catalogued checkpoint to a scratch directory and verify it there."""
    with tempfile.TemporaryDirectory(prefix="nereus-verify-") as scratch:
        try:
            directory = download(objects, entry, Path(scratch) / entry.checkpoint_id)
        except NereusError as exc:
            report = VerifyReport(Path(scratch))
            report.add("download", False, exc.message)
            return report
        report = verify_parallel(directory, expected_shard=(entry.route, entry.partition),
                                 catalog=entry, progress=progress)
        report.path = Path(entry.manifest_key).parent
        return report


def recovery_floor(objects: ObjectStore, shard: ShardId, keep: int) -> Floor:
    members = tuple(catalog(objects, shard)[-keep:]) if keep > 0 else ()
    position = 0
    external: set[str] = set()
    if members:
        positions = [m.applied_position for m in members]
        position = min(-1 if p is None else p for p in positions) + 1
        for member in members:
            manifest = msgspec.json.decode(objects.get_bytes(member.manifest_key), type=Manifest)
            external.update(manifest.external_objects)
    return Floor(str(shard), position, frozenset(external), members)


def check_floor(floor: Floor, *, delete_before: int | None = None,
                delete_objects: frozenset[str] = frozenset()) -> None:
    """Refuse to delete log records or objects a Recovery Set member still needs."""
    if delete_before is not None and delete_before > floor.position:
        needing = [m.checkpoint_id for m in floor.members
                   if (m.applied_position or -1) + 1 < delete_before]
        raise FloorViolation(
            f"deleting the log of {floor.shard} before position {delete_before} would cross the "
            f"Recovery Floor at {floor.position} (needed by {', '.join(needing) or 'replay'})",
            hint="take a newer checkpoint first, or delete only before the floor",
        )
    crossing = sorted(delete_objects & floor.external_objects)
    if crossing:
        raise FloorViolation(
            f"objects still referenced by the Recovery Set of {floor.shard}: "
            f"{', '.join(crossing[:5])}" + (" ..." if len(crossing) > 5 else ""),
        )


def restore_into(objects: ObjectStore, entry: CatalogEntry, target: Path,
                 progress: Callable[[int], None] | None = None, *, replace: bool = False,
                 mark: bool = False,
                 before_move: Callable[[], None] | None = None) -> VerifyReport:
    """Download ``entry`` into a staging directory next to ``target`` (so on the same
    filesystem), verify it there, then move it into place with one rename.

    Nothing is moved unless every check passed. A failed, refused or interrupted restore
    removes its staging directory and leaves ``target`` as it was (a SIGKILL leaves the
    staging directory behind: the next restore next to ``target`` sweeps it, its pid being
    dead). ``target`` must be absent or an empty directory unless ``replace``: then the new
    image and the old contents swap places atomically (``renameat2(RENAME_EXCHANGE)``; two
    renames where the filesystem lacks it) and the old contents are deleted afterwards.
    ``mark`` leaves ``restore_target.MARKER`` in the image (the CLI's restores; the engine's
    own restore is live state at once). ``before_move`` runs just before the move and may
    raise to stop it (the CLI checks again that the target has not become live).
    """
    from nereus.adapters.restore_target import write_marker

    target = target.absolute()
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    sweep_staging(target)
    staging = target.parent / f"{_staging_prefix(target)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir(mode=0o700)
    try:
        try:
            download(objects, entry, staging, progress)
        except NereusError as exc:
            report = VerifyReport(target)
            report.add("download", False, exc.message)
            return report
        report = verify_parallel(staging, expected_shard=(entry.route, entry.partition),
                                 catalog=entry)
        report.path = target
        if not report.ok:
            return report
        if mark:
            write_marker(staging, checkpoint_id=entry.checkpoint_id,
                         shard=f"{entry.route}/{entry.partition}")
        _sync_tree(staging)
        if before_move is not None:
            before_move()
        _move_into_place(staging, target, replace=replace)
        return report
    finally:
        _remove(staging)  # gone after a plain move; the old contents after an exchange


def _staging_prefix(target: Path) -> str:
    return f".{target.name}.restoring-"


def sweep_staging(target: Path) -> list[Path]:
    """Remove staging directories of earlier restores next to ``target`` whose process
    is gone (killed before it could clean up). Returns what it removed."""
    prefix = _staging_prefix(target)
    swept = []
    for sibling in target.parent.glob(glob.escape(prefix) + "*"):
        pid_text = sibling.name[len(prefix):].split("-", 1)[0]
        if pid_text.isdigit() and not _alive(int(pid_text)):
            _remove(sibling)
            swept.append(sibling)
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sync_tree(directory: Path) -> None:
    """Make every file of ``directory`` private (0600, like everything in a home, whatever
    the umask) and fsync it, then the directory: the image is durable before the rename
    makes it visible."""
    for child in directory.iterdir():
        fd = os.open(child, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, 0o600)
            os.fsync(fd)
        finally:
            os.close(fd)
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_into_place(staging: Path, target: Path, *, replace: bool) -> None:
    occupied = target.is_dir() and any(target.iterdir())
    if occupied and not replace:
        raise NereusError(f"{target} is not empty: the verified checkpoint was not moved "
                          "into it", hint="restore into an empty or new directory")
    if not occupied:
        if target.is_dir():
            target.rmdir()  # empty: rename(2) could replace it, but not one that is a mount
        staging.rename(target)
    elif not _exchange(staging, target):
        aside = target.parent / f"{_staging_prefix(target)}{os.getpid()}-old"
        target.rename(aside)
        try:
            staging.rename(target)
        except BaseException:
            aside.rename(target)
            raise
        _remove(aside)
    _fsync_dir(target.parent)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically with ``renameat2(RENAME_EXCHANGE)``; False where the
    kernel, the C library or the filesystem does not offer it."""
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second),
                 rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def new_checkpoint_id(applied_position: int | None, token: str) -> str:
    """Sortable by position: ``cp-<applied position, 12 digits>-<token>``."""
    return f"cp-{(applied_position if applied_position is not None else 0):012d}-{token}"


@dataclass(frozen=True, slots=True)
class Taken:
    entry: CatalogEntry
    manifest: Manifest
    size_bytes: int


def checkpoint_now(
    store: ShardStore,
    shard: ShardId,
    objects: ObjectStore,
    staging: Path,
    *,
    token: str,
    now_ms: int,
    progress: Callable[[int], None] | None = None,
) -> Taken:
    """Take, upload and catalogue a checkpoint of ``store`` as it is now."""
    existing = catalog(objects, shard)
    parent = existing[-1].checkpoint_id if existing else None
    checkpoint_id = new_checkpoint_id(store.applied_position(), token)
    directory, manifest = take_local(store, shard, staging, checkpoint_id=checkpoint_id,
                                     parent=parent, now_ms=now_ms)
    try:
        entry = upload(objects, directory, manifest, progress)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return Taken(entry, manifest, sum(f.size for f in manifest.files))


class CheckpointTaken(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``checkpoint create`` document (offline, or the engine's ``/v1/checkpoints``)."""

    checkpoint_id: str
    shard: str
    applied_position: int | None
    digest: str
    parent: str | None
    files: int
    size_bytes: int
    created_at: str
    object_store: str
    manifest_key: str


def taken_view(taken: Taken, objects: ObjectStore) -> CheckpointTaken:
    return CheckpointTaken(
        checkpoint_id=taken.entry.checkpoint_id,
        shard=f"{taken.entry.route}/{taken.entry.partition}",
        applied_position=taken.entry.applied_position, digest=taken.entry.digest,
        parent=taken.manifest.parent, files=len(taken.manifest.files),
        size_bytes=taken.size_bytes, created_at=taken.entry.created_at,
        object_store=objects.description, manifest_key=taken.entry.manifest_key)


def delete_checkpoint(objects: ObjectStore, entry: CatalogEntry, floor: Floor) -> int:
    """Delete a catalogued checkpoint that is not in the Recovery Set: the catalog entry
    first (from then on nothing points at it; a delete killed half-way leaves only
    harmless orphaned files), then its files. Returns how many objects went."""
    if any(m.checkpoint_id == entry.checkpoint_id for m in floor.members):
        raise FloorViolation(f"checkpoint {entry.checkpoint_id} is a member of the Recovery "
                             f"Set of {floor.shard}: it is never deleted")
    prefix = checkpoint_prefix(entry.route, entry.partition, entry.checkpoint_id)
    keys = [info.key for info in objects.list(prefix)]
    check_floor(floor, delete_objects=frozenset(keys))
    objects.delete(catalog_key(entry.route, entry.partition, entry.checkpoint_id))
    for key in sorted(keys, key=lambda k: k.endswith(MANIFEST_NAME)):  # manifest last
        objects.delete(key)
    return len(keys) + 1
