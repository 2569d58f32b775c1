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

    Most point reads of the apply path miss: every SCHEDULE looks up ``result/c/<id>``
    and ``msg/<id>`` and finds nothing. Without filters each miss walks the index and
    data blocks of every SST file and level (~11 us each on a large database); with a
    whole-key bloom filter per SST and a whole-key bloom filter in the memtable, a miss is
    settled by a few hash probes. Filters change how tables are laid out on disk, never
    the keys and values (the state digest is unaffected), and tables written without them
    (or with another size) stay readable.

    ``BLOOM_BITS_PER_KEY`` (16) bits per key, not the usual 10: a miss probes about ten
    filters at a deep backlog (one per level-0 file and per level), and at 10 bits about 1 %
    of the probes pass by mistake, each reading a data block into the block cache for
    nothing, so the cache filled with such blocks and the apply's CPU per command grew with
    the backlog. At 16 bits 0.08 % pass. ``bench/lsm_backlog.py --bloom-bits 10,16`` (two
    databases of 2.5M schedule-like commands at once): false positives 522,000 -> 45,000
    of 54M probes, data blocks read 273,000 -> 151,000, the fill 69.2 -> 55.7 s.
    ``bench/scale.py``, 10M pending on 4 shards, two pairs of runs alternating on one
    machine: the last tenth applied at 0.74 and 0.89x the first's rate -> 0.99 and 1.02x,
    the engine's CPU per command in the last tenth 65 and 58 -> 47 and 51 us. The cost is
    memory outside the budget: filters of 2 bytes a key instead of 1.25 (a SCHEDULE writes
    three keys), indexes and filters at 10M pending 58 -> 80 MB, the engine's RSS there
    316-338 -> 334-367 MB.

    Compression: LZ4 on every level, in blocks of 16 KiB (RocksDB's default is 4 KiB). A
    larger block gives LZ4 more to share and the index a quarter of the entries. On
    bench/scale.py at 2,000,000 pending on 4 shards: 375 B per pending message (LZ4 with
    LZ4HC on the bottommost level, 4 KiB blocks) -> 329 B with 16 KiB blocks -> 342 B with
    LZ4 on every level too, which fills that backlog in 89 s instead of 119-149 s (LZ4HC
    compactions took a core from the apply) and drains a herd of 300,000 at 4,088/s
    instead of 3,428/s, lane b's p99 300 ms instead of 450 (``--herd 300000``). zstd with
    a trained dictionary took 372 B on bench/verify.py's shard (LZ4HC 480 B there) but
    made every read of a block about five times slower here. Tables written before stay
    readable as they are; a point read decompresses 16 KiB instead of 4 (microseconds).

    With ``memory`` (an engine's ``StoreMemory``), the block cache and the memtables are
    the process's shared budget instead of this database's own.

    ``lazy_indexes``: each table's index and bloom filter are read into the block cache
    when a read needs them, not loaded for every table while the database opens (the
    default). They are about 1.5% of the data (8.6 MB for bench/verify's 1M-message shard
    of 556 MB; 48 MB at 5 GB), so a full open grew with the database: 100-150 ms at 5 GB
    against 15-50 ms this way, where opening a table reads only its footer and properties
    (every table is still opened, so RocksDB's key estimate counts them all, as before),
    by one thread rather than RocksDB's pool of 16: starting the pool cost more than the
    few footers it reads (the read-only open of bench/verify's shard in a fresh process
    5.5 -> 4.4 ms). A reader, never a writer, option: the files are the same either way.

    Compaction starts when level 0 holds ``L0_COMPACTION_TRIGGER`` (16) files, not
    RocksDB's 4. The timeline's keys (and message ids, which are UUIDs) arrive in random
    order, so every compaction out of level 0 rewrites the part of the level below that it
    overlaps, which is nearly all of it, whatever the batch: a batch four times larger
    rewrites that level a quarter as often. Writes slow down at 3x and stop at 4x the
    trigger (RocksDB: 20 and 36). A point read probes up to that many more bloom filters
    and a seek merges that many more tables. ``bench/lsm_backlog.py`` (2.5M schedule-like
    commands into each of two databases at once, random ids, the reads apply makes):
    flush and compaction CPU 18.8 -> 9.8 s per database, the fill 43.7 -> 37.0 s (8:
    38.1 s). ``bench/scale.py``, 10M pending, same machine: the last tenth applied at
    0.66-0.70x the first's rate with 4 (two runs), 0.72-0.95x with 16 (four runs).

    ``mapped``: tables are read through ``mmap`` instead of ``pread``, which saves the
    kernel's copy of every block: a full scan of bench/verify.py's 1M-message shard took
    1.00 s instead of 1.10-1.19 s. A table file truncated under a mapping kills the
    process with SIGBUS instead of raising, so only a process whose death its parent
    survives uses it (the digest child of a checkpoint verify); read-only opens only.
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
