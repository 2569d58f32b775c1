"""Downloading, verifying and restoring a catalogued checkpoint.

A restore stages the download in a hidden directory next to its target (the same
filesystem), verifies it there, makes it durable and moves it into place with one rename;
nothing is moved unless every check passed, and the staging directories of killed
restores are swept by the next one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.adapters.home.durable_files import fsync_dir
from nereus.adapters.offline.parallel_verify import verify_parallel
from nereus.checkpoint.manifest import MANIFEST_NAME, CatalogEntry, Manifest
from nereus.checkpoint.verify import VerifyReport
from nereus.errors import NereusError


def download(objects: ObjectStore, entry: CatalogEntry, dest: Path,
             progress: Callable[[int], None] | None = None) -> Path:
    """Fetch every file of a checkpoint (checksums verified by the store) into ``dest``:
    exactly the files its manifest names, each from the checkpoint holding it (an
    incremental checkpoint's borrowed files from the earlier ones')."""
    dest.mkdir(parents=True, exist_ok=True)
    objects.get_file(entry.manifest_key, dest / MANIFEST_NAME)
    manifest = msgspec.json.decode((dest / MANIFEST_NAME).read_bytes(), type=Manifest)
    for file in manifest.files:
        objects.get_file(manifest.file_key(file), dest / file.name)
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
    from nereus.adapters.offline.restore_target import write_marker

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
    fsync_dir(directory)


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
    fsync_dir(target.parent)


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
