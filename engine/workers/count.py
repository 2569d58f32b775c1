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
    shards = sum(route.partitions for route in config.routes.values())
    return max(1, min(available_cores() if cores is None else cores, shards))


MIN_WORKER_MEMORY_MB = 16


def worker_memory_mb(memory_mb: int | None, workers: int) -> int | None:
    """A worker's share of the engine's ``[engine] memory_mb``: the budget is the engine's,
    split evenly between its worker processes (at least 16 MiB each), so N workers do not
    hold N budgets. None (a cache per database) stays None."""
    if memory_mb is None:
        return None
    return max(MIN_WORKER_MEMORY_MB, memory_mb // max(workers, 1))
