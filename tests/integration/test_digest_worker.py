"""The digest verification computes in a child process equals the in-process digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.adapters.offline.parallel_verify import pipelined_digest, process_digest, split_points
from nereus.checkpoint.verify import store_digest
from nereus.machine import apply
from nereus.records import encode
from nereus.shard import ShardId
from nereus.state.digest import leaf_of
from nereus.state.keys import SCHEMA_VERSION
from nereus.state.store import LiveFile, ShardStore
from nereus.state.values import Identity
from nereus.state.view import Overlay
from tests.unit.builders import schedule


def _store(path: Path, messages: int) -> None:
    shard = ShardId("default", 0)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=SCHEMA_VERSION)
    with ShardStore.open(path, identity=identity, create=True) as store:
        overlay = Overlay(store)
        for position in range(messages):
            data = encode(schedule(f"m{position}", 1_000 + position))
            overlay.merge(apply(overlay, data, position=position, broker_ms=0).writes)
        store.write(overlay.finish())


def test_the_child_process_digest_equals_the_in_process_one(tmp_path: Path) -> None:
    """The digest computed by child processes, one range each, equals the one computed in
    this process, for any number of ranges; so does the v1 digest of one child."""
    _store(tmp_path / "db", 9_000)  # more than two digest chunks
    with ShardStore.open(tmp_path / "db", read_only=True) as store:
        expected = store_digest(store)
        expected_v1 = store_digest(store, 1)
        assert pipelined_digest(store) == expected_v1
    for parts in (1, 2, 3):
        assert process_digest(tmp_path / "db", parts=parts) == expected
        assert process_digest(tmp_path / "db", parts=parts, here=True) == expected
    assert process_digest(tmp_path / "db", version=1) == expected_v1


def test_a_mapped_read_only_store_digests_the_same_and_a_writer_cannot_map(
        tmp_path: Path) -> None:
    """Tables read through mmap (what the digest child does) give the same digest; a
    writable open refuses mapped reads."""
    _store(tmp_path / "db", 3_000)
    with ShardStore.open(tmp_path / "db", read_only=True) as store:
        expected = store_digest(store)
    with ShardStore.open(tmp_path / "db", read_only=True, mapped=True) as mapped:
        assert store_digest(mapped) == expected
    with pytest.raises(ValueError, match="read-only"):
        ShardStore.open(tmp_path / "db", mapped=True)


def test_a_child_that_cannot_open_the_database_raises_with_its_reason(tmp_path: Path) -> None:
    """A child that cannot open the database ends in an error that says why."""
    with pytest.raises(RuntimeError, match="no shard database"):
        process_digest(tmp_path / "missing")


def _files(count: int) -> list[LiveFile]:
    """RocksDB's file list for ``count`` equal files of msg keys, ``00..`` to ``99..``
    split evenly, and one of local state."""
    files = [LiveFile(name=f"{n}.sst", size=1_000, level=6,
                      start_key=bytes([2, n * 100 // count]) + b"abcdef",
                      end_key=bytes([2, (n + 1) * 100 // count - 1]) + b"zzzzzz",
                      num_entries=100) for n in range(count)]
    files.append(LiveFile(name="local.sst", size=10**9, level=6, start_key=b"\x81claim",
                          end_key=b"\x81zz", num_entries=10_000))
    return files


def test_split_points_are_ascending_leaf_boundaries_that_share_the_weight() -> None:
    """Cuts come from RocksDB's file list: leaf boundaries, ascending, about one share of
    entries and bytes apart, local-state files ignored; none for one part."""
    cuts = split_points(_files(8), 4)
    assert cuts == [b"\x02\x19ab", b"\x02\x32ab", b"\x02\x4bab"]
    assert all(cut == leaf_of(cut) for cut in cuts)
    assert split_points(_files(8), 1) == []


def test_a_share_that_ends_inside_a_file_is_cut_inside_it() -> None:
    """One file shared by two ranges is cut between its first and last key; with
    ``first``, the first range is that many times each other's share."""
    cuts = split_points(_files(1), 2)
    assert len(cuts) == 1 and b"\x02\x00abcdef" < cuts[0] < b"\x02\x63zzzzzz"
    low, high = int.from_bytes(b"\x02\x00ab", "big"), int.from_bytes(b"\x02\x63zz", "big")
    assert int.from_bytes(cuts[0], "big") == (low + high) // 2  # the first 4 bytes, halfway
    # a first range of half a share: a third of the file, then two thirds
    assert split_points(_files(1), 2, first=0.5)[0] < cuts[0]
    assert split_points(_files(6), 2, first=0.5) == [b"\x02\x21ab"]
    # a file that reaches from replicated keys into local state is never cut past 0x80
    spanning = [LiveFile(name="a.sst", size=1_000, level=6, start_key=b"\x70a",
                         end_key=b"\x90z", num_entries=100)]
    assert split_points(spanning, 2) == []
