"""A fixture that turns a ``MemoryShard``'s state into a real RocksDB shard store, for
tests of code that reads a ``ShardStore`` (the scheduler's planner)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from nereus.testing import MemoryShard

Build = Callable[[MemoryShard], ShardStore]


@pytest.fixture
def store_from(tmp_path: Path) -> Iterator[Build]:
    """``store_from(shard)``: a new store holding exactly ``shard``'s state (closed after)."""
    stores: list[ShardStore] = []

    def build(shard: MemoryShard) -> ShardStore:
        store = ShardStore.open(tmp_path / f"db{len(stores)}", create=True,
                                identity=Identity(route="default", partition=0,
                                                  schema_version=keys.SCHEMA_VERSION))
        store.write(dict(shard.data))
        stores.append(store)
        return store

    yield build
    for store in stores:
        store.close()
