"""How many worker processes ``engine start`` runs: ``--workers N`` (or
``NEREUS_WORKERS``), else ``[engine] workers``, else one per core this process may run on,
at most one per shard the home runs (a worker that owns no shard would only cost memory
and a session). One means the single daemon, no front door.
"""

from __future__ import annotations

import os

from nereus.config import Config


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers narrow)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(config: Config, given: int | None, *, cores: int | None = None) -> int:
    """The number of worker processes for ``config`` (module docstring)."""
    if given is not None:
        return given
    if config.engine.workers is not None:
        return config.engine.workers
    return max(1, min(available_cores() if cores is None else cores, _shards(config)))


def _shards(config: Config) -> int:
    return sum(route.partitions for route in config.routes.values())


def worker_shards(config: Config, workers: int) -> int:
    """The shards one of ``workers`` worker processes serves when each has its share (the
    even split, rounded up): what its memtables are sized for. A worker serving more (its
    peer stopped) stays within its budget: the write-buffer manager flushes earlier.

    Sized for every shard of the home instead, each of 2 workers on 4 shards got 8 MiB
    memtables where 16 MiB fit its budget: twice the flushes and the level-0 compactions."""
    return max(1, -(-_shards(config) // max(workers, 1)))


MIN_WORKER_MEMORY_MB = 16


def worker_memory_mb(memory_mb: int | None, workers: int) -> int | None:
    """A worker's share of the engine's ``[engine] memory_mb``: the budget is the engine's,
    split evenly between its worker processes (at least 16 MiB each), so N workers do not
    hold N budgets. None (a cache per database) stays None."""
    if memory_mb is None:
        return None
    return max(MIN_WORKER_MEMORY_MB, memory_mb // max(workers, 1))
