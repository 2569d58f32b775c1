"""Where an engine process's memory is, as Prometheus gauges read at scrape time.

``[engine] memory_mb`` bounds the block cache and memtables of every shard database of a
process (``nereus.state.memory``); outside it grow the tables' indexes and bloom filters
(RocksDB's ``estimate-table-readers-mem``, some 8 bytes a pending message) and the Python
heap. So an operator can tell which one a growing RSS is: ``nereus_resident_memory_bytes``
(``/proc/self/statm``; summed with the front door's), ``nereus_store_memory_budget_bytes``
and ``nereus_store_block_cache_bytes`` (the process's share and what its cache holds), and
per shard ``nereus_store_memtable_bytes`` and ``nereus_store_table_readers_bytes``. A shard
whose database closed while it was read is left out of that scrape.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from nereus.engine.process.home_engine import Engine

SHARD: Final = ["route", "shard"]
MEMTABLES: Final = "rocksdb.cur-size-all-mem-tables"
TABLE_READERS: Final = "rocksdb.estimate-table-readers-mem"


def resident_bytes() -> int | None:
    """This process's resident set in bytes (None where ``/proc/self/statm`` is absent)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def resident_family() -> Metric:
    """``nereus_resident_memory_bytes`` of this process (no sample where it is unknown)."""
    family = GaugeMetricFamily(
        "nereus_resident_memory_bytes", "Resident memory of this engine process (the front "
        "door and its workers each report theirs: the sum is the engine's)")
    resident = resident_bytes()
    if resident is not None:
        family.add_metric([], resident)
    return family


def memory_families(engine: Engine) -> Iterator[Metric]:
    """The store's memory gauges of ``engine``'s process and shards (module docstring)."""
    yield resident_family()
    budget = GaugeMetricFamily(
        "nereus_store_memory_budget_bytes", "This process's share of [engine] memory_mb: "
        "the block cache and memtables of all its shard databases")
    cache = GaugeMetricFamily(
        "nereus_store_block_cache_bytes", "What this process's shared block cache holds now "
        "(data blocks, and the memtables charged to it)")
    if engine.memory is not None:
        budget.add_metric([], engine.memory.budget_bytes)
        cache.add_metric([], engine.memory.usage_bytes())
    memtables = GaugeMetricFamily(
        "nereus_store_memtable_bytes", "Bytes of the shard database's memtables (inside the "
        "budget)", labels=SHARD)
    readers = GaugeMetricFamily(
        "nereus_store_table_readers_bytes", "Indexes and bloom filters of the shard "
        "database's tables held outside the budget; they grow with the data", labels=SHARD)
    for shard, loop in sorted(engine.shards.items()):
        in_memtables = loop.store.property_int(MEMTABLES)  # None once the database closed
        in_readers = loop.store.property_int(TABLE_READERS)
        labels = [shard.route, str(shard)]
        if in_memtables is not None:
            memtables.add_metric(labels, in_memtables)
        if in_readers is not None:
            readers.add_metric(labels, in_readers)
    yield from (budget, cache, memtables, readers)
