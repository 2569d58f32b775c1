"""The owner's retention sweeps (``engine/shard/retention_sweep.py``): one seek says whether
anything is due; a SWEEP names the due ``retain`` keys oldest first, and the next waits until it is
applied."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import cast

from nereus.engine.shard.outbox import Outbox
from nereus.engine.shard.retention_sweep import SweepTrigger
from nereus.records import Sweep, decode
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from tests.fake_clock import FakeClock

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


class Records:
    """Stands in for the loop's outbox: keeps what the trigger adds."""

    def __init__(self) -> None:
        self.added: list[bytes] = []

    def add(self, records: Iterable[bytes]) -> None:
        self.added.extend(records)


def test_a_sweep_names_the_due_keys_oldest_first_and_waits_for_its_result(
        tmp_path: Path) -> None:
    """Three keys, two due: one SWEEP naming those two in expireAt order; nothing more
    until its result is applied; a look within the second finds nothing to do."""
    clock = FakeClock(wall_ms=10_000)
    ids = iter(f"sw{n}" for n in range(10))
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        store.write({keys.retain_key(9_000, keys.RETAIN_MESSAGE, "b"): b"",
                     keys.retain_key(5_000, keys.RETAIN_RESULT, "c/a"): b"",
                     keys.retain_key(20_000, keys.RETAIN_MESSAGE, "later"): b""})
        records = Records()
        trigger = SweepTrigger(store, cast(Outbox, records), time=clock, owner_id="me",
                               new_id=lambda: next(ids))
        assert trigger.maybe_sweep(1)
        [data] = records.added
        sweep = decode(data)
        assert isinstance(sweep, Sweep)
        assert (sweep.owner_id, sweep.fencing_epoch) == ("me", 1)
        assert sweep.entries == (keys.retain_key(5_000, keys.RETAIN_RESULT, "c/a"),
                                 keys.retain_key(9_000, keys.RETAIN_MESSAGE, "b"))
        clock.advance(2.0)
        assert not trigger.maybe_sweep(1)  # the first is not applied yet
        store.write({keys.result_key("s/sw0"): b"applied",
                     **dict.fromkeys(sweep.entries)})
        clock.advance(0.5)
        assert not trigger.maybe_sweep(1)  # looked less than a second ago
        clock.advance(1.0)
        assert not trigger.maybe_sweep(1)  # nothing due: "later" is at 20 s
        clock.step_wall(10_000)
        clock.advance(1.0)
        assert trigger.maybe_sweep(1) and trigger.sweeps == 2
