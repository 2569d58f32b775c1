"""One memory budget for every shard database a process opens.

Without one, each RocksDB database keeps its own block cache and memtables, so a
process's memory grows with its shard count whatever the shards hold. ``StoreMemory``
is one LRU block cache and one write-buffer manager whose memtables are charged to that
cache, so the databases of a process share ``budget_mb`` between them; each database's
memtable is sized from the budget and the number of shards it must serve
(``memtable_bytes``), within 1..64 MiB. The budget changes where bytes live in memory,
never a key or a value: digests and checkpoints are unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

MIB: Final = 1 << 20
MIN_MEMTABLE: Final = 1 * MIB
MAX_MEMTABLE: Final = 64 * MIB  # RocksDB's default write buffer


@dataclass(frozen=True, slots=True)
class StoreMemory:
    """A process's shared block cache and write-buffer manager (module docstring)."""

    budget_bytes: int
    memtable_bytes: int
    cache: Any  # rocksdict.Cache
    write_buffers: Any  # rocksdict.WriteBufferManager

    @classmethod
    def of(cls, budget_mb: int, *, shards: int) -> StoreMemory:
        """A budget of ``budget_mb`` MiB for ``shards`` databases: half of it may hold
        memtables (charged to the cache), and each database's memtable gets an equal
        share of that half, 1..64 MiB."""
        from rocksdict import Cache, WriteBufferManager

        budget = budget_mb * MIB
        cache = Cache(budget)
        write_buffers = WriteBufferManager.new_write_buffer_manager_with_cache(
            budget // 2, False, cache)
        share = budget // 2 // max(shards, 1) // 2  # a database may hold two memtables
        return cls(budget_bytes=budget,
                   memtable_bytes=min(max(share, MIN_MEMTABLE), MAX_MEMTABLE),
                   cache=cache, write_buffers=write_buffers)

    def usage_bytes(self) -> int:
        """What the shared cache holds now (blocks and the memtables charged to it)."""
        return int(self.cache.get_usage())
