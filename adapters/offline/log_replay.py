"""Deterministic offline replay: apply a shard's log into a database with the same code
the engine runs, so the result can be compared digest for digest with the live shard.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.errors import NereusError
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.digest import DIGEST_VERSION, digest_sorted
from nereus.state.store import ShardStore
from nereus.state.values import Identity


@dataclass(frozen=True, slots=True)
class ReplayReport:
    into: Path
    records: int
    applied_position: int | None
    digest: str


def store_digest(store: ShardStore, version: int = DIGEST_VERSION) -> str:
    """The state digest of everything replicated in ``store`` (of ``version``: an older
    one to compare with a checkpoint that carries it)."""
    return digest_sorted(store.replicated(), version)


def replay_empty(
    log: ShardLog,
    shard: ShardId,
    into: Path,
    *,
    stop_at: int | None = None,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Apply ``log`` from position 0 into a new database at ``into``."""
    if into.exists() and any(into.iterdir()):
        if not replace:
            raise NereusError(
                f"{into} is not empty",
                hint="choose an empty directory, or pass --force to replace its contents",
            )
        shutil.rmtree(into)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    with ShardStore.open(into, identity=identity, create=True) as store:
        runner = ShardRunner(store, log, batch_records=5_000)
        total = runner.run_until_caught_up(stop_at=stop_at, progress=progress)
        return ReplayReport(into, total, store.applied_position(), store_digest(store))
