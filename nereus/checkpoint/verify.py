"""Checkpoint verification: is this directory really a usable image of that shard?

Checks, in order, each a ``Check`` with ``name``, ``ok`` and a ``detail`` naming the file,
key or value at fault: ``manifest`` (parses, format 1, 2 or 3: an incremental checkpoint's
manifest names every file of its chain, downloaded beside it), ``files_present``,
``file_sizes`` and ``file_checksums`` (BLAKE3 in format 2, SHA-256 in 1), ``identity`` (the
manifest, the catalog entry when verifying by id, and the database's ``meta/identity``
agree), ``db_opens`` (read-only), ``applied_position`` and ``digest`` (recomputed in the
manifest format's digest version). A failed early check skips those that depend on it
(reported as skipped, not ok). Threads and processes are the caller's to pass in
(``adapters/offline/parallel_verify.py``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from nereus.checkpoint.incremental import format_problem
from nereus.checkpoint.manifest import (
    FILE_HASH_NAMES,
    FILE_HASH_OF_FORMAT,
    FORMAT,
    FORMAT_VERSION,
    FORMAT_VERSIONS,
    MANIFEST_NAME,
    CatalogEntry,
    FileEntry,
    Manifest,
    encode_json,
)
from nereus.errors import NereusError
from nereus.state.digest import DIGEST_VERSION, digest_sorted
from nereus.state.store import ShardStore

_CHUNK = 4 << 20


class Check(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One named check and its outcome; ``skipped`` when an earlier failure made it moot
    (then ``ok`` is false but it does not count as a failure of its own)."""

    name: str
    ok: bool
    detail: str
    skipped: bool = False


class CheckpointVerification(msgspec.Struct, frozen=True, kw_only=True,
                             forbid_unknown_fields=True):
    """The ``checkpoint verify`` document: the verdict and every check, in order.
    ``path`` is the directory (or the checkpoint's place in the object store), null when
    the download failed; ``checkpoint_id`` is null when no manifest could be read."""

    ok: bool
    path: str | None
    checkpoint_id: str | None
    checks: list[Check]


@dataclass
class VerifyReport:
    path: Path
    checks: list[Check] = field(default_factory=list)
    manifest: Manifest | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name=name, ok=ok, detail=detail))
        return ok

    def skip(self, *names: str) -> None:
        for name in names:
            self.checks.append(Check(name=name, ok=False,
                                     detail="skipped: an earlier check failed", skipped=True))

    def document(self) -> CheckpointVerification:
        return CheckpointVerification(
            ok=self.ok, path=str(self.path),
            checkpoint_id=self.manifest.checkpoint_id if self.manifest else None,
            checks=list(self.checks))


def file_sha256(path: Path, progress: Callable[[int], None] | None = None) -> tuple[int, str]:
    return file_hash(path, progress, "sha256")


def file_hash(path: Path, progress: Callable[[int], None] | None = None,
              algorithm: str = "blake3") -> tuple[int, str]:
    """(size, hex checksum) of the file at ``path``: ``blake3`` or ``sha256``. BLAKE3 hashes
    the file memory-mapped (a third less CPU than reading it into buffers)."""
    from blake3 import blake3

    if algorithm == "blake3":
        size = os.path.getsize(path)
        hasher = blake3()
        if size:
            hasher.update_mmap(path)
        if progress is not None:
            progress(size)
        return size, hasher.hexdigest()
    digest = hashlib.new(algorithm)
    size = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if progress is not None:
                progress(len(chunk))
    return size, digest.hexdigest()


# (paths, progress, algorithm) -> (size, hex checksum) of each path
HashFiles = Callable[[list[Path], Callable[[int], None] | None, str], list[tuple[int, str]]]
DigestStore = Callable[[ShardStore, int], str]  # (store, state digest version) -> digest


def _hash_files(paths: list[Path], progress: Callable[[int], None] | None,
                algorithm: str) -> list[tuple[int, str]]:
    return [file_hash(path, progress, algorithm) for path in paths]


def store_digest(store: ShardStore, version: int = DIGEST_VERSION) -> str:
    """The state digest of a store (replicated range, key order), of ``version``."""
    return digest_sorted(store.replicated(), version)


def read_manifest(path: Path) -> Manifest:
    """Parse ``path/manifest.json``; raises NereusError saying what is wrong."""
    try:
        raw = (path / MANIFEST_NAME).read_bytes()
    except FileNotFoundError:
        raise NereusError(f"no {MANIFEST_NAME} in {path}") from None
    try:
        manifest = msgspec.json.decode(raw, type=Manifest)
    except msgspec.DecodeError as exc:
        raise NereusError(f"{path / MANIFEST_NAME} does not parse: {exc}") from None
    if manifest.format != FORMAT:
        raise NereusError(f"{path / MANIFEST_NAME}: format {manifest.format!r} is not {FORMAT!r}")
    if manifest.format_version not in FORMAT_VERSIONS:
        raise NereusError(f"{path / MANIFEST_NAME}: format version {manifest.format_version} is "
                          f"not supported (this build reads "
                          f"{', '.join(map(str, FORMAT_VERSIONS))})")
    problem = format_problem(manifest)
    if problem is not None:
        raise NereusError(f"{path / MANIFEST_NAME}: {problem}")
    return manifest


def verify_directory(
    path: Path,
    *,
    expected_shard: tuple[str, int] | None = None,
    catalog: CatalogEntry | None = None,
    progress: Callable[[int], None] | None = None,
    hash_files: HashFiles | None = None,
    digest: DigestStore | None = None,
) -> VerifyReport:
    """Run every check on ``path``.

    ``hash_files`` and ``digest`` let the engine substitute parallel implementations
    (the core has no threads); they must return exactly what the defaults return.
    """
    report = VerifyReport(Path(path))
    try:
        manifest = read_manifest(report.path)
    except NereusError as exc:
        report.add("manifest", False, exc.message)
        report.skip("files_present", "file_sizes", "file_checksums", "identity", "db_opens",
                    "applied_position", "digest")
        return report
    report.manifest = manifest
    report.add("manifest", True, f"{manifest.checkpoint_id} of {manifest.shard}, format "
                                 f"v{manifest.format_version}, {len(manifest.files)} files")
    missing = [f.name for f in manifest.files if not (report.path / f.name).is_file()]
    if not report.add("files_present", not missing,
                      f"missing: {', '.join(missing)}" if missing else
                      f"all {len(manifest.files)} files present"):
        report.skip("file_sizes", "file_checksums", "identity", "db_opens", "applied_position",
                    "digest")
        return report
    files_match = _check_files(report, manifest, hash_files or _hash_files, progress)
    identity_problems = _manifest_identity_problems(manifest, expected_shard, catalog)
    if not files_match:
        report.add("identity", not identity_problems,
                   "; ".join(identity_problems) or "manifest identity matches")
        report.skip("db_opens", "applied_position", "digest")
        return report
    _check_database(report, manifest, identity_problems, digest or store_digest)
    return report


def _check_files(report: VerifyReport, manifest: Manifest, hash_files: HashFiles,
                 progress: Callable[[int], None] | None) -> bool:
    """``file_sizes`` and ``file_checksums``, file by file; True when both passed."""
    wrong_size = []
    for entry in manifest.files:
        size = os.path.getsize(report.path / entry.name)
        if size != entry.size:
            wrong_size.append(f"{entry.name} is {size} bytes, manifest says {entry.size}")
    report.add("file_sizes", not wrong_size, "; ".join(wrong_size) or "all sizes match")
    wrong_sum = []
    paths = [report.path / entry.name for entry in manifest.files]
    algorithm = manifest.file_hash
    hashes = hash_files(paths, progress, algorithm)
    name = FILE_HASH_NAMES[algorithm]
    for entry, (_, found) in zip(manifest.files, hashes, strict=True):
        listed = entry.checksum(algorithm)
        if found != listed:
            wrong_sum.append(f"{entry.name} has {name} {found[:16]}.., manifest says "
                             f"{listed[:16] + '..' if listed else 'none'}")
    report.add("file_checksums", not wrong_sum,
               "; ".join(wrong_sum) or f"all checksums match ({name})")
    return not wrong_size and not wrong_sum


def _manifest_identity_problems(manifest: Manifest, expected_shard: tuple[str, int] | None,
                                catalog: CatalogEntry | None) -> list[str]:
    """Where the manifest disagrees with the shard expected and with its catalog entry."""
    problems = []
    if expected_shard is not None and (manifest.route, manifest.partition) != expected_shard:
        problems.append(
            f"manifest is for shard {manifest.shard}, expected {expected_shard[0]}/"
            f"{expected_shard[1]}")
    if catalog is not None and (
        (catalog.route, catalog.partition, catalog.checkpoint_id, catalog.digest)
        != (manifest.route, manifest.partition, manifest.checkpoint_id, manifest.digest)
    ):
        problems.append(
            f"catalog entry names {catalog.route}/{catalog.partition} {catalog.checkpoint_id} "
            f"digest {catalog.digest[:16]}.., the manifest {manifest.shard} "
            f"{manifest.checkpoint_id} digest {manifest.digest[:16]}..")
    return problems


def _check_database(report: VerifyReport, manifest: Manifest, identity_problems: list[str],
                    digest: DigestStore) -> None:
    """``identity`` (now with the database's own), ``db_opens``, ``applied_position`` and
    ``digest``, recomputed from the database opened read-only."""
    try:
        store = ShardStore.open(report.path, read_only=True)
    except NereusError as exc:
        report.add("identity", not identity_problems,
                   "; ".join(identity_problems) or "manifest identity matches")
        report.add("db_opens", False, exc.message)
        report.skip("applied_position", "digest")
        return
    with store:
        identity = store.identity()
        if identity is None:
            identity_problems.append("the database has no meta/identity")
        elif (identity.route, identity.partition) != (manifest.route, manifest.partition):
            identity_problems.append(
                f"the database belongs to {identity.route}/{identity.partition}, the manifest "
                f"says {manifest.shard}")
        report.add("identity", not identity_problems,
                   "; ".join(identity_problems) or f"shard {manifest.shard} everywhere")
        report.add("db_opens", True, "RocksDB opened the checkpoint read-only")
        applied = store.applied_position()
        report.add("applied_position", applied == manifest.applied_position,
                   f"database at {applied}, manifest says {manifest.applied_position}")
        recomputed = digest(store, manifest.digest_version)
        report.add("digest", recomputed == manifest.digest,
                   f"recomputed {recomputed[:16]}.., manifest {manifest.digest[:16]}.. "
                   f"(state digest v{manifest.digest_version})")


def upgrade_manifest(path: Path, *, digest: DigestStore | None = None) -> Manifest:
    """Rewrite the format 1 manifest of the checkpoint at ``path`` as format 2.

    The checkpoint is verified first, SHA-256 checksums and v1 digest included (an image
    that does not verify is not given new ones: NereusError says which check failed); then
    the files' BLAKE3 checksums and the v2 digest are computed and ``manifest.json`` is
    replaced (temp file + rename). The files themselves are untouched. A format 2 manifest
    is returned as it is.
    """
    report = verify_directory(path, digest=digest)
    manifest = report.manifest
    if manifest is None or not report.ok:
        failed = next((c for c in report.checks if not c.ok and not c.skipped), None)
        raise NereusError(f"{path} does not verify, so it is not upgraded: "
                          f"{failed.name + ': ' + failed.detail if failed else 'no checks'}")
    if manifest.format_version >= FORMAT_VERSION:
        return manifest
    with ShardStore.open(Path(path), read_only=True) as store:
        recomputed = (digest or store_digest)(store, DIGEST_VERSION)
    algorithm = FILE_HASH_OF_FORMAT[FORMAT_VERSION]
    files = [FileEntry(name=entry.name, size=entry.size,
                       **{algorithm: file_hash(Path(path) / entry.name, None, algorithm)[1]})
             for entry in manifest.files]
    upgraded = msgspec.structs.replace(manifest, format_version=FORMAT_VERSION,
                                       digest=recomputed, files=files)
    temporary = Path(path) / (MANIFEST_NAME + ".upgrade")
    temporary.write_bytes(encode_json(upgraded))
    os.replace(temporary, Path(path) / MANIFEST_NAME)
    return upgraded
