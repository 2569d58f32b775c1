"""One node of a cluster: it joins (a session and its member record), takes part in the
election, and owns exactly the shards whose ownership records it holds; each round it
follows the configuration's revisions and the routes' evidence keys (``following.py``).

The supervised ``cluster`` worker reconciles on every change under the cluster's prefix, at
least every ``interval_s``: a lost session lets every shard go and joins again; if nobody
leads, try (the leader places: ``leader.py``); shards placed here that another node owns
are warmed (``warmup.py``) and ``warm/<shard>`` written once caught up, and so are
(silently) those another node owns that this one stands by for (``standby.py``: a failover
here replays only the tail); shards placed elsewhere are released as planned moves once the
target is warm (or gone, or ``warm_wait_s`` passed); shards placed here with no owner are
taken (ownership record by CAS, then ``epochs/<shard>`` +1) and activated, or the counter
is raised when the log applied a higher epoch (``shard_epoch_raised``); a record of this
session it does not hold is a lost take's, deleted (``shard_take_undone``). A shard that
cannot run here is held FAILED with its reason, retried after ``FAILED_RETRY_S`` doubling
(``docs/rules.md`` §12).
Stop: warm-ups stop, shards drain, the session closes so others take over at once.
"""

from __future__ import annotations

import contextlib
import os
import threading

from nereus.adapters.cluster.cluster_store import ClusterStore, Owned
from nereus.adapters.cluster.feature_levels import refuse_below_level
from nereus.adapters.time_source import Clock
from nereus.cluster import keys
from nereus.cluster.records import Member, OwnerState, Warm
from nereus.cluster.standby import standby_node
from nereus.coordination.errors import CoordinationError, NotificationsLost
from nereus.coordination.protocol import Notifications, Session
from nereus.engine.hosting.cluster.following import ConfigFollower, KeyFollower
from nereus.engine.hosting.cluster.leader import place_shards
from nereus.engine.hosting.cluster.lease import SessionLease
from nereus.engine.hosting.cluster.node_settings import (
    FAILED_RETRY_MAX_S,
    FAILED_RETRY_S,
    IN_USE_RETRY_MAX_S,
    IN_USE_RETRY_S,
    ConfigSource,
    HeldFailure,
    NodeSettings,
)
from nereus.engine.hosting.cluster.warmup import WarmUp, shares_home
from nereus.engine.process.home_engine import Engine
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.engine.shard.loop_status import ShardState, error_text
from nereus.errors import StoreInUse
from nereus.shard import ShardId

ENDED_STATES = frozenset({ShardState.FENCED, ShardState.FAILED, ShardState.STOPPED})


class ClusterNode:
    """This process as a member of the cluster (see the module's docstring)."""

    def __init__(self, engine: Engine, store: ClusterStore, settings: NodeSettings, *,
                 clock: Clock, events: EventLog, reload: ConfigSource | None = None) -> None:
        self.engine = engine
        # the configuration's revisions and the routes' sealed evidence keys (following.py)
        self._followers = (ConfigFollower(store, engine, reload, events),
                           KeyFollower(store, engine, settings.seal_key, events,
                                       node_id=settings.node_id, session=lambda: self._session))
        self.store = store
        self.settings = settings
        self._clock = clock
        self._events = events
        self._owned: dict[ShardId, Owned] = {}
        self._warming: dict[ShardId, WarmUp] = {}
        self._said_warm: set[ShardId] = set()  # warm records of ours in the coordinator
        self._moving_since: dict[ShardId, float] = {}  # our shards placed elsewhere: since
        self._failed: dict[ShardId, HeldFailure] = {}  # shards held FAILED (module docstring)
        self._last_failure: dict[ShardId, HeldFailure] = {}  # kept across a retry's let-go
        self._session: Session | None = None
        self._lease: SessionLease | None = None
        self._watch: Notifications | None = None
        self._stop = threading.Event()
        self._worker: Supervised | None = None
        self.leading = False

    # membership -------------------------------------------------------------------------
    def join(self) -> None:
        """A new session and this node's member record (``NodeIdInUse`` if taken)."""
        s = self.settings
        session = self.store.handle.coordinator.create_session(
            s.session_ttl_ms, client_identity=f"{s.node_id}@{s.host}:{os.getpid()}")
        try:
            member = Member(
                node_id=s.node_id, host=s.host, address=s.address, capacity=s.capacity,
                version=s.version, pid=os.getpid(), started_ms=self._clock.wall_ms(),
                feature_level=s.feature_level)
            self.store.register(session, member)
            # read after the member record is written: `cluster migrate` marks the cluster
            # moved before it looks for live nodes, so one of the two sees the other
            self.store.refuse_moved()
            refuse_below_level(self.store, member)  # the same order (feature_levels.py)
        except BaseException:
            session.close()
            raise
        self._session = session
        self._lease = SessionLease(session, self._clock, margin_ms=s.lease_margin_ms)
        safe_event(self._events, "cluster_joined", node_id=s.node_id,
                   session_id=session.session_id, coordinator=self.store.url)

    @property
    def owned(self) -> list[ShardId]:
        return sorted(self._owned, key=str)

    def start(self, supervisor: Supervisor) -> None:
        self._worker = supervisor.spawn("cluster", "cluster", self.run)

    def run(self) -> None:
        """The supervised worker body: reconcile, then wait for a change or the interval."""
        while not self._stop.is_set():
            self.reconcile()
            self._wait_for_change()

    def _wait_for_change(self) -> None:
        try:
            if self._watch is None:
                self._watch = self.store.handle.coordinator.get_notifications(
                    self.store.watch_prefix())
            if self._watch.poll(self.settings.interval_s) is not None:
                while self._watch.poll(0) is not None:  # a burst: reconcile once for it
                    pass
        except NotificationsLost:
            self._close_watch()

    def _close_watch(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    # one round --------------------------------------------------------------------------
    def reconcile(self) -> None:
        """One round of the steps in the module's docstring."""
        if self._session is None or self._session.lost():
            self._rejoin()
        assert self._session is not None
        for follower in self._followers:
            follower.follow()
        now_ms = self._clock.wall_ms()
        self.leading = self.store.try_lead(self._session, self.settings.node_id,
                                           now_ms=now_ms)
        if self.leading:
            place_shards(self.store, self.engine.configured_shards(), now_ms=now_ms,
                         events=self._events)
        placements = self.store.placements()
        configured = set(self.engine.configured_shards())
        mine = sorted((shard for shard, (placement, _) in placements.items()
                       if placement.node_id == self.settings.node_id and shard in configured),
                      key=str)
        # warm first: letting a shard go below takes a while, and the warm-ups run meanwhile
        self._warm(mine, self.store.owners())
        warms = None  # read only when a shard of ours is placed elsewhere
        for shard in list(self._owned):
            loop = self.engine.shards.get(shard)
            placed = placements.get(shard)
            failed = self._failed.get(shard)
            if failed is not None:
                if shard not in mine:
                    self._let_go(shard, checkpoint=False, why="placed elsewhere while FAILED")
                elif self._clock.monotonic() >= failed.retry_at:
                    self._let_go(shard, checkpoint=False, why="trying it again after: "
                                 f"{failed.reason}")
            elif loop is not None and loop.state == ShardState.FAILED and shard in mine:
                self._hold_failed(shard, loop.error or "its loop failed", refused=False)
            elif loop is None or loop.state in ENDED_STATES:
                self._let_go(shard, checkpoint=False,
                             why=f"its loop ended ({'gone' if loop is None else loop.state})")
            elif placed is None or placed[0].node_id != self.settings.node_id:
                where = "nowhere" if placed is None else placed[0].node_id
                if placed is not None and warms is None:
                    warms = self.store.warms()
                if placed is None or self._target_ready(
                        shard, where, None if warms is None else warms.get(shard)):
                    self._let_go(shard, checkpoint=True, why=f"placed on {where}")
            else:
                self._moving_since.pop(shard, None)
        owners = self.store.owners()
        for shard in mine:
            if shard in self._owned or self._stop.is_set():
                continue
            held = owners.get(shard)
            if held is None:
                self._stop_warming(shard)
                self._take(shard)
            elif held.version.session_id == self._session.session_id:
                self._undo_lost_take(shard, held)

    def _undo_lost_take(self, shard: ShardId, held: Owned) -> None:
        """An ownership record on this node's session that this node does not hold: a take
        whose answer was lost (the coordinator did not answer within the deadline, yet
        wrote it). Nobody else may take the shard while it is there, so delete it (CAS on
        the version read): the next round takes the shard again."""
        if self.store.release(shard, held):
            safe_event(self._events, "shard_take_undone", level="warning", shard=str(shard),
                       epoch=held.record.epoch,
                       reason="its ownership record was written on this node's session, "
                              "but the take's answer was lost")

    def _warm(self, mine: list[ShardId], owners: dict[ShardId, Owned]) -> None:
        """Warm every shard placed here that another node still owns, and say so once it is
        warm; warm the shards this node stands by for too (``standby.py``: a failover here
        replays only the tail), without saying so; stop warming the others."""
        members = self.store.members() if self.settings.standby else None
        standing = self._standing(mine, owners, members)
        for shard in [s for s in {*self._warming, *self._said_warm}
                      if s not in mine and s not in standing]:
            self._stop_warming(shard)
        if self._stop.is_set():
            return
        for shard in [*mine, *standing]:
            owner = owners.get(shard)
            if shard in self._owned or owner is None \
                    or owner.record.node_id == self.settings.node_id:
                continue
            warm_up = self._warming.get(shard)
            if warm_up is not None or shard in self._said_warm:
                if warm_up is not None and warm_up.ready.is_set() and shard in mine:
                    self._say_warm(shard, warm_up.applied_position)
                continue
            if members is None:
                members = self.store.members()
            if not self.settings.warm_up or shares_home(
                    members.get(owner.record.node_id), host=self.settings.host,
                    home=self.engine.home):
                if shard in mine:
                    self._say_warm(shard, None)  # no copy of its own to warm: ready as it is
                continue
            warm_up = self._warming[shard] = WarmUp(self.engine, shard, events=self._events,
                                                    standby=shard not in mine)
            warm_up.start()

    def _standing(self, mine: list[ShardId], owners: dict[ShardId, Owned],
                  members: dict[str, Member] | None) -> list[ShardId]:
        """The configured shards another node owns that this node stands by for."""
        if members is None:
            return []
        capacities = {node: member.capacity for node, member in members.items()}
        configured = set(self.engine.configured_shards())
        return sorted((shard for shard, owned in owners.items()
                       if shard in configured and shard not in mine
                       and owned.record.node_id != self.settings.node_id
                       and standby_node(owned.record.node_id, capacities)
                       == self.settings.node_id), key=str)

    def _say_warm(self, shard: ShardId, applied_position: int | None) -> None:
        if shard in self._said_warm or self._session is None:
            return
        self.store.say_warm(self._session, Warm(
            shard=keys.shard_segment(shard), node_id=self.settings.node_id,
            applied_position=applied_position, since_ms=self._clock.wall_ms()))
        self._said_warm.add(shard)

    def _stop_warming(self, shard: ShardId) -> None:
        warm_up = self._warming.pop(shard, None)
        if warm_up is not None:
            warm_up.stop()
        if shard in self._said_warm:
            self._said_warm.discard(shard)
            with contextlib.suppress(CoordinationError):
                self.store.unsay_warm(shard, self.settings.node_id)

    def _target_ready(self, shard: ShardId, target: str, warm: Warm | None) -> bool:
        """Whether a shard of ours placed on ``target`` may be let go now: the target says
        it is warm, it is not a member (nobody warms), or ``warm_wait_s`` has passed."""
        if (warm is not None and warm.node_id == target) or \
                target not in self.store.members():
            self._moving_since.pop(shard, None)
            return True
        now = self._clock.monotonic()
        since = self._moving_since.setdefault(shard, now)
        if now - since < self.settings.warm_wait_s:
            return False
        safe_event(self._events, "shard_move_target_not_warm", level="warning",
                   shard=str(shard), target=target, waited_s=round(now - since, 1))
        self._moving_since.pop(shard, None)
        return True

    def _rejoin(self) -> None:
        """The session is over (or never began): let every shard go now, join again."""
        if self._owned:
            safe_event(self._events, "cluster_session_lost", level="warning",
                       node_id=self.settings.node_id, shards=[str(s) for s in self._owned])
        for shard in list(self._owned):
            self.engine.release_shard(shard, checkpoint=False, timeout_s=5.0)
            self._owned.pop(shard)
        self._failed.clear()
        self._said_warm.clear()  # they went with the old session (or are deleted below)
        if self._session is not None:
            old = self._session.session_id
            with contextlib.suppress(CoordinationError):  # the store cannot be told now:
                self._session.close()  # what it kept is deleted below
            if gone := self.store.forget_session(old):
                safe_event(self._events, "cluster_stale_records_deleted", session_id=old,
                           keys=gone)
        self.join()

    def _take(self, shard: ShardId) -> None:
        assert self._session is not None and self._lease is not None
        owned = self.store.take(self._session, shard, node_id=self.settings.node_id,
                                owner_id=self.engine.owner_id, now_ms=self._clock.wall_ms())
        if owned is None:
            return  # someone holds it (an old owner still letting go): a later round
        self._owned[shard] = owned
        epoch = owned.record.epoch
        safe_event(self._events, "shard_taken", shard=str(shard), epoch=epoch)
        try:
            loop = self.engine.activate_shard(shard, epoch=epoch, lease=self._lease)
        except Exception as exc:  # held FAILED, saying why (not taken again every round)
            refused = self.engine.refused.get(shard)
            self._hold_failed(shard, refused.reason if refused else error_text(exc),
                              refused=True, in_use=isinstance(exc, StoreInUse))
            return
        except BaseException:  # never hold a record for a shard this node does not run
            self._let_go(shard, checkpoint=False, why="its activation was interrupted")
            raise
        if loop.state == ShardState.ACTIVE:
            self._last_failure.pop(shard, None)
            self._owned[shard] = self.store.update_owner(self._session, shard, owned,
                                                         state=OwnerState.ACTIVE)
        elif loop.state == ShardState.FAILED:
            self._hold_failed(shard, loop.error or "its loop failed", refused=False)
        elif (applied := loop.stale_grant) is not None:
            counter = self.store.raise_epoch(shard, applied, node_id=self.settings.node_id,
                                             now_ms=self._clock.wall_ms())
            safe_event(self._events, "shard_epoch_raised", level="warning", shard=str(shard),
                       granted=epoch, applied=applied, counter=counter)
            self._let_go(shard, checkpoint=False,
                         why=f"its log has applied epoch {applied}, not below the granted "
                             f"{epoch}: the epoch counter is raised to {counter}")
        else:
            self._let_go(shard, checkpoint=False,
                         why=f"it did not become active: {loop.error or loop.state}")

    def _hold_failed(self, shard: ShardId, reason: str, *, refused: bool,
                     in_use: bool = False) -> None:
        """Keep the shard's record, FAILED with ``reason``, until its retry is due. A refused
        activation's reason is logged here at error, unless the last failure here said the
        same (a failed loop logged its own: ``shard_failed``, ``shard_diverged``). A
        database another process still holds (``in_use``) is tried again soon
        (``IN_USE_RETRY_S``): its previous owner is letting go."""
        assert self._session is not None
        last = self._last_failure.get(shard)
        attempts = 1 if last is None else last.attempts + 1
        first, most = (IN_USE_RETRY_S, IN_USE_RETRY_MAX_S) if in_use else \
            (FAILED_RETRY_S, FAILED_RETRY_MAX_S)
        delay = min(first * 2 ** (attempts - 1), most)
        failure = self._failed[shard] = self._last_failure[shard] = HeldFailure(
            reason=reason, refused=refused, attempts=attempts,
            retry_at=self._clock.monotonic() + delay)
        owned = self._owned[shard]
        safe_event(self._events, "shard_activation_failed" if refused else "shard_held_failed",
                   level="error" if refused and (last is None or last.reason != reason)
                   else "info",
                   shard=str(shard), epoch=owned.record.epoch, reason=reason,
                   attempts=attempts, retry_in_s=delay)
        self._owned[shard] = self.store.update_owner(
            self._session, shard, owned, state=OwnerState.FAILED, detail=failure.reason,
            refused=refused)

    def _let_go(self, shard: ShardId, *, checkpoint: bool, why: str) -> None:
        owned = self._owned[shard]
        safe_event(self._events, "shard_letting_go", shard=str(shard), reason=why,
                   epoch=owned.record.epoch)
        if checkpoint and self._session is not None:
            # the release goes on if this fails; the record goes with the session anyway
            with contextlib.suppress(CoordinationError):
                owned = self.store.update_owner(self._session, shard, owned,
                                                state=OwnerState.RELEASING, detail=why)
        self.engine.release_shard(shard, checkpoint=checkpoint)
        self._owned.pop(shard)
        self._failed.pop(shard, None)
        self._moving_since.pop(shard, None)
        self.store.release(shard, owned)

    # stop -------------------------------------------------------------------------------
    def stop_reconciling(self, timeout_s: float = 30.0) -> None:
        """End the worker (before the engine stops its shards)."""
        self._stop.set()
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(timeout_s)
        self._close_watch()
        for shard in {*self._warming, *self._said_warm}:
            self._stop_warming(shard)

    def leave(self) -> None:
        """After the engine stopped: close the session, so its records go now."""
        self._owned.clear()
        if self._session is not None:
            self._session.close()
        safe_event(self._events, "cluster_left", node_id=self.settings.node_id)
