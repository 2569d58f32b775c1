"""A checkpoint reads only the table files it has not hashed before
(``checkpoint_take.hashed``): a snapshot hard-links the live database's unchanged files, so
their inodes are known; a file written again is read again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nereus.adapters.offline import checkpoint_take
from nereus.checkpoint.verify import file_hash


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths ``file_hash`` read, in order (with an empty cache)."""
    seen: list[Path] = []

    def counting(path: Path, *args: object) -> tuple[int, str]:
        seen.append(path)
        return file_hash(path)

    monkeypatch.setattr(checkpoint_take, "_HASHED", {})
    monkeypatch.setattr(checkpoint_take, "file_hash", counting)
    return seen


def test_a_hard_link_of_a_hashed_file_is_not_read_again(tmp_path: Path,
                                                         reads: list[Path]) -> None:
    """The same inode under a second snapshot's name gives the first one's checksum
    without a read; the checksum is the file's own."""
    table = tmp_path / "live" / "000012.sst"
    table.parent.mkdir()
    table.write_bytes(b"table bytes" * 1000)
    first = checkpoint_take.hashed(table)
    linked = tmp_path / "snapshot-2" / "000012.sst"
    linked.parent.mkdir()
    os.link(table, linked)
    assert checkpoint_take.hashed(linked) == first == file_hash(table)
    assert reads == [table]


def test_a_file_written_again_is_read_again(tmp_path: Path, reads: list[Path]) -> None:
    """A file replaced by another of the same name and size (another inode), or rewritten
    in place (another mtime), is hashed from its bytes."""
    table = tmp_path / "000013.sst"
    table.write_bytes(b"a" * 4096)
    before = checkpoint_take.hashed(table)
    replacement = tmp_path / "new.sst"
    replacement.write_bytes(b"b" * 4096)
    replacement.replace(table)
    replaced = checkpoint_take.hashed(table)
    assert replaced != before and replaced == file_hash(table)
    stat = table.stat()
    table.write_bytes(b"c" * 4096)
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert checkpoint_take.hashed(table) == file_hash(table) != replaced
    assert reads == [table, table, table]
