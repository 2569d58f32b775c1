"""How many worker processes ``engine start`` runs when it is not told
(``nereus.engine.hosting.workers.count``)."""

from __future__ import annotations

import pytest

from nereus.config import Config, parse_config
from nereus.engine.hosting.workers.count import available_cores, worker_count


def config(partitions: int, *, workers: int | None = None) -> Config:
    engine = "" if workers is None else f"[engine]\nworkers = {workers}\n"
    return parse_config(f"""{engine}
[routes.default]
partitions = {partitions}

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"
""", source="test.toml")


@pytest.mark.parametrize(("partitions", "cores", "expected"),
                         [(1, 8, 1), (2, 8, 2), (16, 8, 8), (4, 1, 1), (3, 2, 2)])
def test_one_worker_per_core_at_most_one_per_shard(partitions: int, cores: int,
                                                   expected: int) -> None:
    """Unset, the count is the cores this process may use, capped by the home's shards."""
    assert worker_count(config(partitions), None, cores=cores) == expected


def test_the_flag_wins_over_the_file_and_the_file_over_the_cores() -> None:
    """``--workers N`` first, then ``[engine] workers``, then the cores."""
    assert worker_count(config(8, workers=3), 5, cores=8) == 5
    assert worker_count(config(8, workers=3), None, cores=8) == 3
    assert worker_count(config(8), None, cores=8) == 8


def test_the_cores_are_those_this_process_may_run_on() -> None:
    """The affinity mask narrows the count (as a container's cpuset does)."""
    import os

    assert available_cores() == len(os.sched_getaffinity(0))


def test_workers_in_the_file_are_checked() -> None:
    """``[engine] workers = 0`` is refused when the file is read, naming the field."""
    from nereus.errors import ConfigError

    with pytest.raises(ConfigError, match="workers"):
        config(2, workers=0)


def test_workers_split_the_engine_memory_budget() -> None:
    """[engine] memory_mb is the engine's: each of N workers gets 1/N, at least 16 MiB; no
    budget (a cache per database) stays none."""
    from nereus.engine.hosting.workers.count import worker_memory_mb

    assert worker_memory_mb(256, 1) == 256
    assert worker_memory_mb(256, 2) == 128
    assert worker_memory_mb(64, 8) == 16
    assert worker_memory_mb(None, 4) is None


@pytest.mark.parametrize(("partitions", "workers", "share"),
                         [(4, 2, 2), (5, 2, 3), (1, 2, 1), (16, 1, 16), (3, 4, 1)])
def test_a_worker_sizes_its_memtables_for_its_share_of_the_shards(
        partitions: int, workers: int, share: int) -> None:
    """Each of N workers serves about 1/N of the shards (rounded up), so its memtables are
    sized for that many, not for every shard of the home."""
    from nereus.engine.hosting.workers.count import worker_shards

    assert worker_shards(config(partitions), workers) == share


def test_the_worker_share_doubles_a_memtable_of_two_workers_on_four_shards() -> None:
    """Sized for its 2 of 4 shards, each of 2 workers gets 16 MiB memtables from its
    128 MiB share of 256, where sizing for all 4 gave it 8 MiB."""
    from nereus.engine.hosting.workers.count import worker_memory_mb, worker_shards
    from nereus.state.memory import MIB, StoreMemory

    budget = worker_memory_mb(256, 2)
    assert budget is not None
    shared = StoreMemory.of(budget, shards=worker_shards(config(4), 2))
    every = StoreMemory.of(budget, shards=4)
    assert (shared.memtable_bytes, every.memtable_bytes) == (16 * MIB, 8 * MIB)
