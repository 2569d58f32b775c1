"""Warming a shard this node is about to own: a planned move's target replays the Command
Topic into its own copy of the shard's state while the old owner still holds the shard, so
its activation replays only the tail.

When the leader's placement names this node for a shard whose ownership record another
node still holds, the node starts a ``WarmUp`` (a supervised worker of the engine, never
the reconcile thread):

1. open the shard's local state (``Engine.open_shard_state``: restored from the newest
   usable Recovery Set member when missing or damaged); when the newest catalogued
   checkpoint is far ahead of it, restore that checkpoint over it instead of replaying the
   difference (``engine/process/restore_catch_up.py``);
2. check it against the log (``continuity.check_shard``): a diverged copy is left alone
   (the activation reports it);
3. apply the log into it with a ``ShardRunner``, following the tail, until stopped; once it
   has caught up (or when it cannot warm here) it is ``ready``, and the node says so in the
   coordinator (``warm/<shard>``), which is when the old owner lets the shard go.

It never appends: applying records is the deterministic replay an activation starts with
anyway, and the state it leaves is a consistent image at one applied position (the
runner's synced batches), so a later activation, here or after the placement changed
again, replays from wherever it stopped. When this node takes the ownership record the
warm-up stops (store and log closed) and ``Engine.activate_shard`` opens the warmed state.

Homes shared by several nodes (the worker processes of one host, nodes in one test
process) hold one copy of each shard's state, the owner's: there is nothing to warm, and
touching it could race the owner's own restore, so no warm-up starts there
(``shares_home``); a state held open by another process is left alone (``StoreInUse``).
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
                 poll_s: float = POLL_S) -> None:
        self._engine = engine
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
                   applied_position=self.applied_position, replayed=self.replayed)

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
                   applied_position=self.applied_position, log_end=log.end_position())
        while not self._stop.is_set():
            report = runner.step()
            if report.records:
                self.replayed += report.records
                self.applied_position = report.last_position
            else:
                if not self.ready.is_set():
                    safe_event(self._events, "shard_warm", shard=str(shard),
                               applied_position=self.applied_position, replayed=self.replayed)
                    self.ready.set()
                self._stop.wait(self._poll_s)
