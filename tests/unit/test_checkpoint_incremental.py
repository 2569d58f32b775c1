"""Which files an incremental checkpoint borrows, and what deleting a checkpoint removes
(``nereus.checkpoint.incremental``), on manifests alone."""

from __future__ import annotations

import pytest

from nereus.adapters.offline.checkpoint_catalog import Floor, FloorViolation, check_floor
from nereus.checkpoint.incremental import deletable, named_keys, share_with_parent
from nereus.checkpoint.manifest import FileEntry, Manifest


def entry(name: str, content: str, checkpoint: str | None = None) -> FileEntry:
    return FileEntry(name=name, size=len(content), blake3=f"h-{content}", checkpoint=checkpoint)


def manifest(checkpoint_id: str, files: list[FileEntry], version: int = 2) -> Manifest:
    return Manifest(format_version=version, checkpoint_id=checkpoint_id, route="r", partition=0,
                    schema_version=1, applied_position=1, records_applied=1, digest="d",
                    files=files, created_at="t", created_at_ms=0)


A = manifest("cp-a", [entry("1.sst", "one"), entry("2.sst", "two"), entry("MANIFEST-1", "m")])


def test_a_chain_borrows_each_unchanged_file_from_the_checkpoint_that_holds_it() -> None:
    """B borrows A's unchanged files; C, taken after B, borrows them from A directly and
    B's own new file from B; a file of the same name with other bytes is uploaded again."""
    files_b, version_b = share_with_parent(
        [entry("1.sst", "one"), entry("2.sst", "two"), entry("3.sst", "three"),
         entry("MANIFEST-1", "m2")], A, level=2)
    assert version_b == 3
    assert [f.checkpoint for f in files_b] == ["cp-a", "cp-a", None, None]
    b = manifest("cp-b", files_b, version_b)
    files_c, _ = share_with_parent(
        [entry("1.sst", "one"), entry("3.sst", "three"), entry("4.sst", "four")], b, level=2)
    assert [f.checkpoint for f in files_c] == ["cp-a", "cp-b", None]
    assert b.file_key(files_b[0]) == "checkpoints/r/0/cp-a/1.sst"
    assert b.file_key(files_b[2]) == "checkpoints/r/0/cp-b/3.sst"


def test_the_feature_level_gates_borrowing_both_ways() -> None:
    """Below level 2 nothing is borrowed and the manifest stays format 2 (what 0.1.0
    reads); at level 2 the same files are borrowed and the manifest is format 3."""
    files = [entry("1.sst", "one"), entry("2.sst", "two")]
    below, version = share_with_parent(files, A, level=1)
    assert version == 2 and all(f.checkpoint is None for f in below)
    at, version = share_with_parent(files, A, level=2)
    assert version == 3 and all(f.checkpoint == "cp-a" for f in at)
    nothing_shared, version = share_with_parent([entry("9.sst", "nine")], A, level=2)
    assert version == 2 and nothing_shared[0].checkpoint is None


def test_deleting_a_parent_keeps_every_file_a_remaining_checkpoint_names() -> None:
    """Pruning A while B borrows A's 1.sst deletes only A's other objects (manifest last);
    pruning B later takes A's leftover with it; a Recovery Floor naming a file refuses
    its deletion."""
    b = manifest("cp-b", [entry("1.sst", "one", "cp-a"), entry("3.sst", "three")], 3)
    a_prefix = ["checkpoints/r/0/cp-a/" + n for n in ("1.sst", "2.sst", "MANIFEST-1",
                                                        "manifest.json")]
    gone = deletable(A, a_prefix, named_keys([b]))
    assert gone == ["checkpoints/r/0/cp-a/2.sst", "checkpoints/r/0/cp-a/MANIFEST-1",
                    "checkpoints/r/0/cp-a/manifest.json"]
    b_prefix = ["checkpoints/r/0/cp-b/3.sst", "checkpoints/r/0/cp-b/manifest.json"]
    assert deletable(b, b_prefix, frozenset()) == [
        "checkpoints/r/0/cp-a/1.sst", "checkpoints/r/0/cp-b/3.sst",
        "checkpoints/r/0/cp-b/manifest.json"]
    floor = Floor("r/0", 0, frozenset(), (), named_keys([b]))
    with pytest.raises(FloorViolation, match=r"cp-a/1\.sst"):
        check_floor(floor, delete_objects=frozenset(a_prefix))
