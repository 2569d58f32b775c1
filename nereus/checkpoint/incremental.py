"""Incremental checkpoints: which files a new checkpoint shares with its parent, and which
objects a deleted checkpoint may take with it.

RocksDB's table files are immutable, so a file of the new image with the name, size and
BLAKE3 of one its parent lists is that file: the new manifest (format 3) names it with the
checkpoint that holds the object (the parent's own, or the one the parent borrowed it
from), and the upload skips it. Every manifest still names every file its image needs, so
a checkpoint verifies and restores on its own, whichever earlier checkpoints are gone from
the catalog. An object goes only when no catalogued checkpoint names it any more
(``deletable``), and never while a Recovery Set member names it (the Recovery Floor).
Shared only from the feature level that allows format 3 (``INCREMENTAL_CHECKPOINT_LEVEL``):
below it every checkpoint is full, format 2, as 0.1.0 writes and reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from nereus.checkpoint.manifest import (
    FORMAT_VERSION,
    INCREMENTAL_FORMAT_VERSION,
    FileEntry,
    Manifest,
)
from nereus.features import INCREMENTAL_CHECKPOINT_LEVEL


def share_with_parent(files: Sequence[FileEntry], parent: Manifest | None, *,
                      level: int) -> tuple[list[FileEntry], int]:
    """``files`` (BLAKE3-listed, as taken) with each one the parent holds borrowed from
    the checkpoint holding it, and the manifest format version they need (3 when any file
    is borrowed, else 2). Nothing is borrowed below ``INCREMENTAL_CHECKPOINT_LEVEL``, from
    a parent of another shard or from a format 1 parent (SHA-256 only)."""
    if parent is None or level < INCREMENTAL_CHECKPOINT_LEVEL or parent.file_hash != "blake3":
        return list(files), FORMAT_VERSION
    held = {(f.name, f.size, f.blake3): f.checkpoint or parent.checkpoint_id
            for f in parent.files}
    shared: list[FileEntry] = []
    for entry in files:
        holder = held.get((entry.name, entry.size, entry.blake3))
        shared.append(entry if holder is None
                      else msgspec.structs.replace(entry, checkpoint=holder))
    borrowed = any(f.checkpoint for f in shared)
    return shared, INCREMENTAL_FORMAT_VERSION if borrowed else FORMAT_VERSION


def own_files(manifest: Manifest) -> list[FileEntry]:
    """The files this checkpoint uploads itself (the others an earlier one holds)."""
    return [f for f in manifest.files if f.checkpoint is None]


def named_keys(manifests: Iterable[Manifest]) -> frozenset[str]:
    """Every object the images of ``manifests`` need (files wherever held, manifests)."""
    found: set[str] = set()
    for manifest in manifests:
        found.update(manifest.object_keys())
    return frozenset(found)


def deletable(doomed: Manifest | None, under_prefix: Iterable[str],
              still_named: frozenset[str]) -> list[str]:
    """What deleting a checkpoint removes: the objects under its own prefix and those its
    manifest borrowed, except what a remaining checkpoint still names; manifest last."""
    candidates = set(under_prefix)
    if doomed is not None:
        candidates |= doomed.object_keys()
    return sorted(candidates - still_named, key=lambda k: (k.endswith("/manifest.json"), k))


def format_problem(manifest: Manifest) -> str | None:
    """Why the manifest's files contradict its format (a borrowed file below format 3, or a
    file said to be held by the checkpoint itself), or None."""
    borrowed = [f.name for f in manifest.files if f.checkpoint is not None]
    if borrowed and manifest.format_version < INCREMENTAL_FORMAT_VERSION:
        return (f"format version {manifest.format_version} cannot borrow files "
                f"({', '.join(borrowed[:3])} name another checkpoint)")
    own = [f.name for f in manifest.files if f.checkpoint == manifest.checkpoint_id]
    if own:
        return f"{', '.join(own[:3])} name the checkpoint itself as their holder"
    return None
