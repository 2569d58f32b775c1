"""One turn of a shard loop applies a bounded amount of its log (``engine/shard/apply_step.py``):
a log that grows as fast as it is applied must not keep the loop from its outcomes, claims
and checkpoints. Real RocksDB, a Shard Log held in a list."""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.adapters.time_source import SYSTEM_CLOCK
from nereus.engine.shard.apply_step import TURN_BATCHES, Applier
from nereus.engine.shard.progress import ResultWatch, ShardProgress
from nereus.machine import Applied
from nereus.records import Outcome, encode
from nereus.records.batch import encode_batch
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from tests.unit.builders import outcome, schedule
from tests.unit.logs import ListLog

BATCH = 50


def test_a_turn_applies_at_most_turn_batches_full_batches(tmp_path: Path) -> None:
    """A backlog of many full batches: each turn applies TURN_BATCHES of them and acts on
    every record it applied; turns go on until the log is applied, and then one more finds
    nothing."""
    total = BATCH * (2 * TURN_BATCHES + 3)
    log = ListLog([(encode(schedule(f"m{n}", 10_000)), 1_000 + n) for n in range(total)])
    identity = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
    acted: list[Applied] = []
    with ShardStore.open(tmp_path / "db", identity=identity, create=True) as store:
        runner = ShardRunner(store, log, batch_records=BATCH)
        progress = ShardProgress(runner, SYSTEM_CLOCK)
        applier = Applier(runner, progress=progress, results=ResultWatch(progress, SYSTEM_CLOCK),
                          act=acted.append)
        turns = []
        while applier.apply(until_empty=False):
            turns.append(runner.next_position)
        assert turns == [BATCH * TURN_BATCHES, 2 * BATCH * TURN_BATCHES, total]
        assert len(acted) == total
        assert store.applied_position() == total - 1


def test_a_batch_counts_its_members_as_the_turn_pace_s_work(tmp_path: Path) -> None:
    """A PUBLISH_BATCH of three outcomes is one log record but three records applied: the
    count the turn pace divides a turn's time by (``TurnPace``), so a level-2 owner does
    not take each batch for one costly record and claim less."""
    members = [encode(outcome(f"m{n}", f"a{n}", Outcome.PUBLISHED, oid=f"o{n}"))
               for n in range(3)]
    log = ListLog([(encode(schedule("m", 10_000)), 1_000), (encode_batch(members, 2), 1_001)])
    identity = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
    acted: list[Applied] = []
    with ShardStore.open(tmp_path / "db", identity=identity, create=True) as store:
        runner = ShardRunner(store, log, batch_records=BATCH)
        progress = ShardProgress(runner, SYSTEM_CLOCK)
        applier = Applier(runner, progress=progress, results=ResultWatch(progress, SYSTEM_CLOCK),
                          act=acted.append)
        assert applier.apply(until_empty=False)
        assert applier.applied_records == 4 and len(acted) == 2
        assert [len(one.members) for one in acted] == [0, 3]
