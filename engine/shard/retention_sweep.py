"""When a shard loop appends a SWEEP (retention, ``nereus.machine.retention``).

The oldest retained item is the first ``retain`` key (big-endian expireAt first), so
"is anything due" is one seek. At most every ``every_s`` seconds, and only while the
loop is the live owner, the loop looks; when the first key is due by the wall clock it
appends one SWEEP naming the due keys, oldest first, ``MAX_SWEEP_ENTRIES`` at most, and
looks again only once that SWEEP is applied (or after ``give_up_s``, should its append
have been lost). Apply removes only what is due by the SWEEP's own broker time, so a
wall clock ahead of the broker costs an early SWEEP that removes less, never a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable

from nereus.adapters.time_source import Clock
from nereus.engine.shard.awaited_record import AwaitedRecord
from nereus.engine.shard.outbox import Outbox
from nereus.machine.retention import MAX_SWEEP_ENTRIES
from nereus.records import Sweep, encode
from nereus.state import keys
from nereus.state.store import ShardStore


class SweepTrigger:
    """One shard loop's retention sweeps (module docstring)."""

    def __init__(self, store: ShardStore, outbox: Outbox, *, time: Clock, owner_id: str,
                 new_id: Callable[[], str], every_s: float = 1.0,
                 give_up_s: float = 60.0) -> None:
        self._store = store
        self._outbox = outbox
        self._time = time
        self._owner_id = owner_id
        self._new_id = new_id
        self._every_s = every_s
        self._next_look = 0.0
        self._on_way: AwaitedRecord[None] = AwaitedRecord(store, give_up_s)
        self.sweeps = 0  # SWEEP records appended (for tests and benchmarks)

    def due(self, now_ms: int, limit: int = MAX_SWEEP_ENTRIES) -> list[bytes]:
        """The ``retain`` keys due by ``now_ms``, oldest first (at most ``limit``)."""
        found: list[bytes] = []
        for key, _ in self._store.scan(keys.RETAIN, keys.prefix_end(keys.RETAIN)):
            if keys.split_retain_key(key)[0] > now_ms or len(found) >= limit:
                break
            found.append(key)
        return found

    def maybe_sweep(self, epoch: int) -> bool:
        """Append a SWEEP if one is due and none is on its way; True when appended."""
        mono = self._time.monotonic()
        if mono < self._next_look:
            return False
        self._next_look = mono + self._every_s
        if self._on_way.settle(mono)[0]:
            return False
        entries = self.due(self._time.wall_ms())
        if not entries:
            return False
        mutation_id = self._new_id()
        self._outbox.add([encode(Sweep(mutation_id=mutation_id, owner_id=self._owner_id,
                                       fencing_epoch=epoch, entries=tuple(entries)))])
        self._on_way.appended(mutation_id, mono, None)
        self.sweeps += 1
        return True
