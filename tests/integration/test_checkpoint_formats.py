"""Checkpoint manifest formats: format 2 carries the v2 state digest and BLAKE3 file
checksums, format 1 checkpoints (v1 digest, SHA-256) still verify, and
``upgrade_manifest`` migrates one after verifying it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from nereus.adapters.offline.checkpoint_take import take_local
from nereus.adapters.offline.parallel_verify import verify_parallel
from nereus.checkpoint.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    FileEntry,
    Manifest,
    encode_json,
)
from nereus.checkpoint.verify import (
    file_sha256,
    store_digest,
    upgrade_manifest,
    verify_directory,
)
from nereus.errors import NereusError
from nereus.machine import apply
from nereus.records import encode
from nereus.shard import ShardId
from nereus.state.keys import SCHEMA_VERSION
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from nereus.state.view import Overlay
from tests.unit.builders import schedule

SHARD = ShardId("default", 0)


def _checkpoint(tmp_path: Path, messages: int = 500) -> tuple[Path, Manifest]:
    identity = Identity(route=SHARD.route, partition=SHARD.partition,
                        schema_version=SCHEMA_VERSION)
    with ShardStore.open(tmp_path / "db", identity=identity, create=True) as store:
        overlay = Overlay(store)
        for position in range(messages):
            data = encode(schedule(f"m{position}", 1_000 + position))
            overlay.merge(apply(overlay, data, position=position, broker_ms=0).writes)
        store.write(overlay.finish())
        return take_local(store, SHARD, tmp_path / "staging", checkpoint_id="cp-1",
                          parent=None, now_ms=1_000)


def _as_format_1(directory: Path, manifest: Manifest) -> Manifest:
    """Rewrite the manifest as an earlier build wrote it: format 1, v1 digest, SHA-256."""
    with ShardStore.open(directory, read_only=True) as store:
        v1 = store_digest(store, 1)
    files = [FileEntry(name=f.name, size=f.size, sha256=file_sha256(directory / f.name)[1])
             for f in manifest.files]
    old = msgspec.structs.replace(manifest, format_version=1, digest=v1, files=files)
    (directory / MANIFEST_NAME).write_bytes(encode_json(old))
    return old


def test_a_new_checkpoint_is_format_2_with_the_v2_digest(tmp_path: Path) -> None:
    """take_local writes format 2 whose digest is the v2 state digest and whose files list
    BLAKE3 checksums (no SHA-256), and it verifies."""
    directory, manifest = _checkpoint(tmp_path)
    assert manifest.format_version == FORMAT_VERSION == 2
    written = json.loads((directory / MANIFEST_NAME).read_bytes())
    assert written["format_version"] == 2
    assert all(set(f) == {"name", "size", "blake3"} for f in written["files"]), written
    with ShardStore.open(directory, read_only=True) as store:
        assert manifest.digest == store_digest(store, 2) != store_digest(store, 1)
    report = verify_directory(directory, expected_shard=(SHARD.route, SHARD.partition))
    assert report.ok, report.document()
    assert "state digest v2" in report.checks[-1].detail


def test_a_format_1_checkpoint_still_verifies_by_its_v1_digest(tmp_path: Path) -> None:
    """A format 1 manifest verifies (core and parallel), its SHA-256 checksums and v1
    digest recomputed; a wrong v1 digest still fails."""
    directory, manifest = _checkpoint(tmp_path)
    old = _as_format_1(directory, manifest)
    for verify in (verify_directory, verify_parallel):
        report = verify(directory)
        assert report.ok, report.document()
        assert "state digest v1" in report.checks[-1].detail
        assert "SHA-256" in report.checks[3].detail, report.checks
    wrong = msgspec.structs.replace(old, digest="0" * 64)
    (directory / MANIFEST_NAME).write_bytes(encode_json(wrong))
    report = verify_directory(directory)
    assert not report.ok
    assert [c.name for c in report.checks if not c.ok] == ["digest"]


def test_upgrade_rewrites_a_format_1_manifest_as_format_2(tmp_path: Path) -> None:
    """upgrade_manifest verifies the format 1 checkpoint, then rewrites its manifest with
    the v2 digest and BLAKE3 checksums, nothing else changed; upgrading again changes
    nothing."""
    directory, manifest = _checkpoint(tmp_path)
    old = _as_format_1(directory, manifest)
    upgraded = upgrade_manifest(directory)
    assert upgraded == manifest  # the format 2 manifest take_local wrote
    assert msgspec.structs.replace(upgraded, format_version=1, digest=old.digest,
                                   files=old.files) == old
    assert verify_directory(directory).ok
    assert upgrade_manifest(directory) == upgraded
    assert not (directory / (MANIFEST_NAME + ".upgrade")).exists()


def test_upgrade_refuses_a_checkpoint_that_does_not_verify(tmp_path: Path) -> None:
    """A format 1 checkpoint whose digest does not match is not given a new one."""
    directory, manifest = _checkpoint(tmp_path)
    old = _as_format_1(directory, manifest)
    (directory / MANIFEST_NAME).write_bytes(
        encode_json(msgspec.structs.replace(old, digest="0" * 64)))
    with pytest.raises(NereusError, match="digest"):
        upgrade_manifest(directory)
    assert json.loads((directory / MANIFEST_NAME).read_bytes())["format_version"] == 1


def test_an_unknown_format_version_is_refused_by_name(tmp_path: Path) -> None:
    """A manifest from a later format fails the manifest check and says which it reads."""
    directory, manifest = _checkpoint(tmp_path)
    (directory / MANIFEST_NAME).write_bytes(
        encode_json(msgspec.structs.replace(manifest, format_version=4)))
    report = verify_directory(directory)
    assert not report.checks[0].ok
    assert "format version 4" in report.checks[0].detail
    assert "1, 2, 3" in report.checks[0].detail


def test_a_borrowed_file_below_format_three_is_refused_by_name(tmp_path: Path) -> None:
    """A format 2 manifest whose file names another checkpoint as its holder contradicts
    its format: the manifest check fails naming the file."""
    directory, manifest = _checkpoint(tmp_path)
    first = msgspec.structs.replace(manifest.files[0], checkpoint="cp-000000000000-other")
    (directory / MANIFEST_NAME).write_bytes(
        encode_json(msgspec.structs.replace(manifest, files=[first, *manifest.files[1:]])))
    report = verify_directory(directory)
    assert not report.checks[0].ok
    assert "format version 2 cannot borrow" in report.checks[0].detail
    assert first.name in report.checks[0].detail
