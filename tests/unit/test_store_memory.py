"""One memory budget for a process's shard databases (``nereus.state.memory``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.state.memory import MAX_MEMTABLE, MIB, MIN_MEMTABLE, StoreMemory
from nereus.state.store import ShardStore


@pytest.mark.parametrize(("budget_mb", "shards", "memtable"), [
    (256, 1, MAX_MEMTABLE),  # one shard: RocksDB's own default, no smaller
    (256, 16, 4 * MIB),  # half the budget for memtables, two per database
    (256, 1_000, MIN_MEMTABLE),  # never below 1 MiB
    (16, 0, 4 * MIB),  # no shard configured yet counts as one
])
def test_each_database_gets_an_equal_share_of_half_the_budget(
        budget_mb: int, shards: int, memtable: int) -> None:
    """memtable = budget / 2 / shards / 2, within 1..64 MiB; the cache is the budget."""
    memory = StoreMemory.of(budget_mb, shards=shards)
    assert memory.memtable_bytes == memtable
    assert memory.budget_bytes == budget_mb * MIB


def test_databases_opened_with_a_budget_share_its_cache(tmp_path: Path) -> None:
    """Two databases written under one budget both charge its cache; the values read back
    are the values written."""
    memory = StoreMemory.of(16, shards=2)
    before = memory.usage_bytes()
    stores = [ShardStore.open(tmp_path / name, create=True, memory=memory)
              for name in ("a", "b")]
    try:
        for n, store in enumerate(stores):
            store.write({f"k{i}".encode(): bytes([n]) * 100 for i in range(2_000)}, sync=True)
        assert memory.usage_bytes() > before
        assert stores[1].get(b"k7") == bytes([1]) * 100
    finally:
        for store in stores:
            store.close()


def test_a_database_opened_again_uses_the_budget_and_the_options_given(tmp_path: Path) -> None:
    """An existing database is opened with this process's options, not those saved in its
    OPTIONS file: its block cache is the shared budget's, its tables are LZ4 in 16 KiB blocks
    (rocksdict used to reload the saved options and a cache of its own for every database
    that already existed, so the budget held only for new ones)."""
    ShardStore.open(tmp_path / "db", create=True).close()  # made without a budget
    memory = StoreMemory.of(32, shards=1)
    with ShardStore.open(tmp_path / "db", memory=memory) as store:
        assert store.property_int("rocksdb.block-cache-capacity") == 32 * MIB
    log = (tmp_path / "db" / "LOG").read_text()
    assert "Options.bottommost_compression: LZ4\n" in log
    assert "block_size: 16384" in log
    assert "Options.compression: LZ4" in log
