"""The RocksDB options of a shard database (``store.ShardStore`` opens every database with
them): raw mode, bloom filters, compression, compaction triggers, the shared memory budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocksdict import Options

    from nereus.state.memory import StoreMemory

BLOCK_BYTES = 16 * 1024  # see shard_options
L0_COMPACTION_TRIGGER = 16  # see shard_options: RocksDB's default is 4
BLOOM_BITS_PER_KEY = 16  # see shard_options: 10 is the usual choice (about 1% false positives)


def shard_options(memory: StoreMemory | None = None, *, lazy_indexes: bool = False,
             mapped: bool = False, bloom_bits: int = BLOOM_BITS_PER_KEY) -> Options:
    """rocksdict Options for a shard database: raw mode, bloom filters, compression by level.

    None of these change a key or a value (the digest is unaffected) and tables written with
    other options stay readable. Whole-key bloom filters of ``BLOOM_BITS_PER_KEY`` (16) bits,
    per SST and in the memtable, settle the apply path's missing point reads; LZ4 on every
    level in ``BLOCK_BYTES`` (16 KiB) blocks; level-0 compaction at ``L0_COMPACTION_TRIGGER``
    (16) files, slowing writes at 3x and stopping them at 4x that. With ``memory`` the block
    cache and memtables are the process's shared budget. Reader-only options:
    ``lazy_indexes`` (indexes and filters read when a seek needs them, tables opened by one
    thread) and ``mapped`` (tables read through ``mmap``; a table truncated under it kills the
    process with SIGBUS, so only a child its parent survives uses it). Why, with the figures:
    ``docs/decisions/0005-rocksdb-table-options.md``.
    """
    from rocksdict import BlockBasedOptions, DBCompressionType, Options

    table = BlockBasedOptions()
    table.set_bloom_filter(bloom_bits, False)
    table.set_block_size(BLOCK_BYTES)
    options = Options(raw_mode=True)
    if lazy_indexes:
        table.set_cache_index_and_filter_blocks(True)
        options.set_max_file_opening_threads(1)
    if memory is not None:
        table.set_block_cache(memory.cache)
        options.set_write_buffer_manager(memory.write_buffers)
        options.set_write_buffer_size(memory.memtable_bytes)
    options.set_block_based_table_factory(table)
    options.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER)
    options.set_level_zero_slowdown_writes_trigger(3 * L0_COMPACTION_TRIGGER)
    options.set_level_zero_stop_writes_trigger(4 * L0_COMPACTION_TRIGGER)
    options.set_memtable_prefix_bloom_ratio(0.1)
    options.set_memtable_whole_key_filtering(True)
    options.set_compression_type(DBCompressionType.lz4())
    options.set_bottommost_compression_type(DBCompressionType.lz4())
    if mapped:
        options.set_allow_mmap_reads(True)
    return options
