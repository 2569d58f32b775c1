"""Warming a shard this node is about to own: a planned move's target applies the Command
Topic into its own copy of the shard's state while the old owner still holds the shard, so
its activation replays only the tail (``docs/decisions/0019-warm-planned-moves.md``).

A ``WarmUp`` (a supervised worker) opens the local state (restored from the Recovery Set
when missing, damaged or far behind: ``restore_catch_up``), leaves a diverged copy alone,
and applies the log with a ``ShardRunner``, following the tail; once caught up it is
``ready`` and the node writes ``warm/<shard>``. It never appends, and leaves a consistent
image at one applied position, so any later activation replays from wherever it stopped.
Taking the shard stops it first. A standby (``nereus/cluster/standby.py``) warms the
shards it stands by for the same way, continuously, so a failover replays only the tail.
Homes shared by several nodes hold only the owner's copy: no warm-up starts there
(``shares_home``), and a state another process holds is left alone.
"""

from __future__ import annotations

import threading
from pathlib import Path

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.offline.continuity_checks import check_shard
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.cluster.records import Member
from nereus.engine.process.home_engine import Engine
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.engine.runtime.supervisor import Supervised
from nereus.errors import LogCorruption, LogDiverged, StoreInUse
from nereus.shard import ShardId
from nereus.state.store import ShardStore

POLL_S = 0.05  # how long an idle warm-up waits before it reads the log again


def shares_home(member: Member | None, *, host: str, home: Path) -> bool:
    """Whether ``member`` (the shard's current owner) serves its admin socket from this
    home on this host, so both nodes keep the shard's state in one directory."""
    if member is None or member.host != host:
        return False
    address = Path(member.address)
    return address.is_absolute() and address.resolve().is_relative_to(home.resolve())


class WarmUp:
    """One shard warmed on this node (see the module's docstring)."""

    def __init__(self, engine: Engine, shard: ShardId, *, events: EventLog,
                 poll_s: float = POLL_S, standby: bool = False) -> None:
        self._engine = engine
        self.standby = standby  # kept warm for a failover, not for a planned move
        self.shard = shard
        self._events = events
        self._poll_s = poll_s
        self._stop = threading.Event()
        self.applied_position: int | None = None
        self.replayed = 0  # records applied by this warm-up
        # set once the state caught up with the log (or could not be warmed here): taking
        # the shard now replays only the tail, so the old owner may let it go
        self.ready = threading.Event()
        self._worker: Supervised | None = None

    def start(self) -> None:
        self._worker = self._engine.supervisor.spawn(
            f"warmup-{self.shard}", "warmup", self.run, fatal=(LogCorruption, LogDiverged))

    def stop(self, timeout_s: float = 120.0) -> None:
        """End the warm-up and wait until its store and log are closed (a restore under
        way finishes first: the activation would otherwise do it again)."""
        self._stop.set()
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(timeout_s)
        safe_event(self._events, "shard_warmed", shard=str(self.shard),
                   applied_position=self.applied_position, replayed=self.replayed,
                   standby=self.standby)

    def run(self) -> None:
        """The supervised worker body (called again after a crash)."""
        engine, shard = self._engine, self.shard
        log = engine.open_shard_log(shard)
        try:
            try:
                store = engine.open_shard_state(shard, log)
            except StoreInUse:  # another process holds it: its owner's, not ours to warm
                safe_event(self._events, "shard_warmup_skipped", shard=str(shard),
                           reason="its state is held by another process")
                self.ready.set()
                return
            try:
                self._follow(store, log)
            finally:
                store.close()
        finally:
            log.close()

    def _follow(self, store: ShardStore, log: ShardLog) -> None:
        """Check the state against the log, then apply the log into it until stopped."""
        engine, shard = self._engine, self.shard
        diverged = check_shard(shard, store, log, engine.layout.shard_state(shard))
        if diverged is not None:  # left as it is: the activation fails it and says why
            safe_event(self._events, "shard_warmup_skipped", shard=str(shard),
                       reason=diverged.message)
            self.ready.set()
            return
        runner = ShardRunner(store, log, batch_records=engine.settings.loop.batch_records)
        self.applied_position = store.applied_position()
        safe_event(self._events, "shard_warming", shard=str(shard),
                   applied_position=self.applied_position, log_end=log.end_position(),
                   standby=self.standby)
        while not self._stop.is_set():
            report = runner.step()
            if report.records:
                self.replayed += report.records
                self.applied_position = report.last_position
            else:
                if not self.ready.is_set():
                    safe_event(self._events, "shard_warm", shard=str(shard),
                               applied_position=self.applied_position, replayed=self.replayed,
                               standby=self.standby)
                    self.ready.set()
                self._stop.wait(self._poll_s)
