"""The digest verification computes in a child process equals the in-process digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.adapters.parallel_verify import pipelined_digest, process_digest, split_points
from nereus.checkpoint.verify import store_digest
from nereus.machine import apply
from nereus.records import encode
from nereus.shard import ShardId
from nereus.state.digest import leaf_of
from nereus.state.keys import SCHEMA_VERSION
from nereus.state.store import ShardStore
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
    assert process_digest(tmp_path / "db", version=1) == expected_v1


def test_a_child_that_cannot_open_the_database_raises_with_its_reason(tmp_path: Path) -> None:
    """A child that cannot open the database ends in an error that says why."""
    with pytest.raises(RuntimeError, match="no shard database"):
        process_digest(tmp_path / "missing")


def test_split_points_are_ascending_leaf_boundaries_that_share_the_weight() -> None:
    """Cuts come from RocksDB's file list: leaf boundaries, ascending, about one share of
    entries and bytes apart, local-state files ignored; none for one file or one part."""
    files = [{"start_key": bytes([2]) + f"{n:02d}abcdef".encode(), "num_entries": 100,
              "size": 1_000} for n in range(8)]
    files.append({"start_key": b"\x81claim", "num_entries": 10_000, "size": 10**9})
    cuts = split_points(files, 4)
    assert cuts == [b"\x0202a", b"\x0204a", b"\x0206a"]
    assert all(cut == leaf_of(cut) for cut in cuts)
    assert split_points(files[:1], 4) == [] and split_points(files, 1) == []
