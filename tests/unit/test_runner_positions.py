"""The shard runner over dense and sparse Source Positions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.errors import LogCorruption
from nereus.records import QueryBarrier, encode
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


class GappyLog:
    """Positions like Pulsar's (ledger << 32 | entry): increasing, not consecutive."""

    def __init__(self, positions: list[int], dense: bool) -> None:
        self.dense = dense
        self.records = [LogRecord(p, 1_000, encode(QueryBarrier(command_id=f"q{p}")))
                        for p in positions]

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        return [r for r in self.records if r.position >= from_position][:max_records]

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:  # pragma: no cover - unused
        raise NotImplementedError

    def end_position(self) -> int:
        return self.records[-1].position + 1

    def ack(self, position: int) -> None:
        pass

    def close(self) -> None:
        pass


POSITIONS = [(3 << 32) | 0, (3 << 32) | 1, (5 << 32) | 0, (5 << 32) | 7, (9 << 32) | 2]


def test_sparse_positions_apply_in_order_and_resume(tmp_path: Path) -> None:
    """A sparse log applies every record once; a restart resumes after the last one."""
    log = GappyLog(POSITIONS, dense=False)
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        runner = ShardRunner(store, log, batch_records=2)
        runner.run_until_caught_up(stop_at=POSITIONS[2])
        assert store.applied_position() == POSITIONS[2]
    with ShardStore.open(tmp_path / "db", identity=IDENTITY) as store:
        runner = ShardRunner(store, log, batch_records=2)
        assert runner.run_until_caught_up() == 2
        assert store.applied_position() == POSITIONS[-1]
        raw = store.get(keys.META_RECORDS)
        assert raw is not None and int.from_bytes(raw, "big") == len(POSITIONS)


def test_a_gap_in_a_dense_log_is_corruption(tmp_path: Path) -> None:
    """A dense log that skips a position stops the runner loudly."""
    log = GappyLog([0, 1, 3], dense=True)
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        runner = ShardRunner(store, log)
        with pytest.raises(LogCorruption, match="position 3 where 2 was next"):
            runner.run_until_caught_up()
        assert store.applied_position() is None
