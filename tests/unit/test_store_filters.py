"""The shard database's bloom filters (``nereus.state.store_options.shard_options``): a read of
a key no table holds, which is what every SCHEDULE's two lookups are, seldom reads a data
block."""

from __future__ import annotations

import random
import re
from pathlib import Path

from nereus.state.store_options import shard_options

KEYS = 40_000
MISSES = 100_000


def _false_positive_share(path: Path) -> float:
    """Of the reads of absent keys that a table's filter was asked about, the share the
    filter let through (each of them reads a data block for nothing)."""
    from rocksdict import Rdict, WriteBatch, WriteOptions

    options = shard_options()
    options.enable_statistics()
    options.create_if_missing(True)
    db = Rdict(str(path), options=options, column_families={"default": options})
    rng = random.Random(15)
    try:
        batch = WriteBatch(raw_mode=True)
        for _ in range(KEYS):
            batch.put(b"\x02" + rng.randbytes(16).hex().encode(), b"m" * 40)
        db.write(batch, WriteOptions())
        db.flush()  # into a table, so the reads below ask its filter
        for _ in range(MISSES):
            assert db.get(b"\x02" + rng.randbytes(16).hex().encode()) is None
        statistics = options.get_statistics() or ""
    finally:
        db.close()

    def count(name: str) -> int:
        found = re.search(rf"^rocksdb\.bloom\.filter\.{name} COUNT : (\d+)", statistics,
                          re.MULTILINE)
        assert found, name
        return int(found.group(1))

    negatives, positives = count("useful"), count("full.positive")
    assert negatives + positives >= MISSES  # every read asked at least one table's filter
    return positives / (negatives + positives)


def test_a_missing_key_passes_the_filter_less_than_one_time_in_three_hundred(
        tmp_path: Path) -> None:
    """16 bits per key: about 0.1 % false positives (10 bits, the usual choice, let about
    1 % through and filled the block cache with blocks read for nothing)."""
    assert _false_positive_share(tmp_path / "db") < 1 / 300
