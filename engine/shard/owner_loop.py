"""One shard's owner loop: apply -> outcomes -> schedule, on one thread.

Each turn: **apply** what the log holds in synced group commits, acting on a batch's
events only once it is synced (``admissions``: hand over, decline, release; another
owner's activation fences this one); **outcomes**: publisher results become
PUBLISH_OUTCOME records in the outbox (``outbox``; callbacks never touch RocksDB);
**schedule**: one planner round claims due work, its admissions following the outcomes into
the log in one group append, retried with the same bytes, now and then with a SWEEP
(``retention_sweep``) or a RETAIN_BACKFILL (``retention_backfill``). On start the loop
recovers (``recovery``, ``ownership``). Every deadline reads the engine's one ``Clock``.
Others see the loop only through ``status()``, ``wake()`` and the ``wait_*`` methods
(``progress``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future

from nereus.adapters.admin.wire import MessageExplanation
from nereus.adapters.backends.destination.protocol import PublishResult
from nereus.adapters.offline.checkpoint_take import Taken
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.engine.metrics.shard_counters import OBSERVED, ShardMetrics
from nereus.engine.runtime.event_log import safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.engine.scheduler.planner import Planner
from nereus.engine.shard.apply_step import Applier
from nereus.engine.shard.checkpoint_triggers import CheckpointTrigger
from nereus.engine.shard.idle_wait import IdleWait
from nereus.engine.shard.lane_policy import LanePolicies
from nereus.engine.shard.loop_parts import EngineParts, OwnerParts, ShardParts, admission_flow
from nereus.engine.shard.loop_status import ShardState, ShardStatus
from nereus.engine.shard.message_explain import explain_message
from nereus.engine.shard.outbox import Outbox
from nereus.engine.shard.ownership import Ownership
from nereus.engine.shard.progress import ProgressWaits, ResultWatch, ShardProgress
from nereus.engine.shard.recovery import Recovery
from nereus.engine.shard.retention_backfill import BackfillTrigger
from nereus.engine.shard.retention_sweep import SweepTrigger
from nereus.errors import LogCorruption, LogDiverged, NereusError
from nereus.evidence_mac import ExpectedMac
from nereus.machine import Applied
from nereus.records import ActivationBarrier, CheckpointMark, ResultStatus
from nereus.state import keys
from nereus.state.values import Lane

# failures no restart can repair: the loop ends FAILED and says why
FATAL_ERRORS: tuple[type[BaseException], ...] = (LogCorruption, LogDiverged)


class ShardLoop(ProgressWaits):
    """One shard's owner: its lifecycle, its loop, what others see; its parts hold state."""

    def __init__(self, parts: ShardParts, engine: EngineParts, owner: OwnerParts) -> None:
        self.shard, self.store, self.log = parts.shard, parts.store, parts.log
        self.clock = engine.clock
        self._time = engine.clock.source  # the engine's one Clock: every deadline reads it
        self.owner_id, self.new_id = owner.owner_id, owner.new_id
        self.settings, self._events = engine.settings, engine.events
        self._publishers = engine.publishers  # the engine's: a lane added later is in it too
        self.runner = ShardRunner(parts.store, parts.log,
                                  batch_records=engine.settings.batch_records)
        self._progress = ShardProgress(self.runner, self._time)
        self._results = ResultWatch(self._progress, self._time)
        self.error: str | None = None
        # each lane's handoff lead as its destination really has it, ordering and limits
        self.lanes_wanted = parts.lanes
        self._wake, self._stop = threading.Event(), threading.Event()
        self.idle = IdleWait(self._wake, self._stop, self._time,
                             poll_interval_s=engine.settings.poll_interval_s,
                             log_look_s=engine.settings.log_look_s)
        self._owner = Ownership(owner.owner_id, parts.store, lease=owner.lease,
                                granted_epoch=owner.granted_epoch)
        # everything below is held across a crash and a restart of the loop (never in a
        # call's locals): claims, records not yet in the log, synced events not acted on
        self._outbox = Outbox(parts.shard, parts.log, time=self._time, events=engine.events,
                              wake=self._wake, feature_level=engine.settings.feature_level)
        self.metrics = ShardMetrics(self._time.monotonic)  # read by engine/metrics/collect
        self._admissions = admission_flow(parts, engine, owner, ownership=self._owner,
                                          outbox=self._outbox, progress=self._progress,
                                          metrics=self.metrics)
        self._applier = Applier(self.runner, progress=self._progress, results=self._results,
                                act=self._on_applied)
        self.checkpoints = CheckpointTrigger(
            parts.shard, parts.store, parts.log, checkpointer=engine.checkpointer,
            staging=parts.staging, clock=engine.clock, owner_id=owner.owner_id,
            wake=self._wake, feature_level=engine.settings.feature_level)
        self._sweeps = SweepTrigger(parts.store, self._outbox, time=self._time,
                                    owner_id=owner.owner_id, new_id=owner.new_id)
        self._backfills = BackfillTrigger(parts.store, self._outbox, time=self._time,
                                          owner_id=owner.owner_id, new_id=owner.new_id)
        self._activated = False
        self._worker: Supervised | None = None
        self._policy_changed = threading.Event()  # lane leads or ordering were reconfigured

    # what others see ------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The fencing epoch this owner activated (0 before recovery)."""
        return self._owner.epoch

    @property
    def stale_grant(self) -> int | None:
        """The epoch the shard's log had applied when recovery refused this owner's granted
        epoch for not being above it (the loop is FENCED then), else None."""
        return self._owner.stale_grant

    @property
    def waiting(self) -> str | None:
        """Why this shard admits nothing right now though it is ACTIVE (None: it may)."""
        return self._admissions.waiting

    @property
    def admissions(self) -> int:
        return self._admissions.admissions

    @property
    def planner(self) -> Planner:
        return self._admissions.planner

    @property
    def applied_position(self) -> int | None:
        return self.runner.next_position - 1 if self.runner.next_position else None

    @property
    def pending_admissions(self) -> int:
        return self._admissions.book.undispatched

    @property
    def in_flight(self) -> int:
        return len(self._admissions.book.dispatched)

    def status(self) -> ShardStatus:
        """This loop now: state, epoch, applied position, claims and what is in flight."""
        flow = self._admissions
        return ShardStatus(
            shard=self.shard, state=self.state, epoch=self.epoch,
            applied_position=self.applied_position, claims=len(flow.book),
            in_flight=self.in_flight, pending_admissions=self.pending_admissions,
            admissions=flow.admissions, publish_outcomes=flow.publish_outcomes,
            error=self.error, waiting=flow.waiting)

    def metric_readings(self) -> tuple[int, float]:
        """(records this loop applied, seconds since its last checkpoint or its start), for
        the Prometheus exposition (``engine/metrics/collect``)."""
        return (self._applier.applied_records,
                self._time.monotonic() - self.checkpoints._last_mono)

    def lanes(self) -> dict[str, Lane]:
        """Replicated lane state for every lane this engine can publish to."""
        return self._admissions.lanes()

    def wake(self) -> None:
        """Look at the log now (records were just appended) instead of at the next poll."""
        self._wake.set()

    def reconfigure_lanes(self, lanes: LanePolicies,
                          record_limits: Mapping[str, int | None]) -> None:
        """New lane settings: the loop replicates them into lane policy."""
        self.lanes_wanted.update(lanes)
        self.planner.record_limits.update(record_limits)
        self._policy_changed.set()
        self._wake.set()

    def reply(self, result: PublishResult) -> None:
        """A publisher's answer (any thread): becomes a PUBLISH_OUTCOME on this loop."""
        self._outbox.reply(result)

    def request_checkpoint(self) -> Future[Taken]:
        """A checkpoint taken between two batches; the Future resolves once catalogued."""
        return self.checkpoints.request()

    def request_snapshot(self) -> Future[str]:
        """A checkpoint whose Future resolves with its id once snapshotted (not uploaded)."""
        return self.checkpoints.request_snapshot()

    def evidence_mac(self, delay_message_id: str, generation: int,
                     attempt_id: str) -> ExpectedMac:
        """The MAC(s) evidence of this attempt must show (the previous key's too during a
        rotation's grace)."""
        return self._admissions.expected_mac(delay_message_id, generation, attempt_id)

    def live_owner_gate(self) -> str | None:
        """Why this owner may not call a producer now (the publisher asks before each)."""
        return self._owner.live_owner_gate()

    # waiting for the loop -------------------------------------------------------------
    def wait_drained(self, deadline: float) -> bool:
        """Block until every claim's admission was acted on (handed over or declined), the
        loop ended, or ``deadline`` (monotonic); True when nothing is pending (engine stop)."""
        return self._progress.wait_until(lambda: not self.pending_admissions, deadline,
                                         step_s=0.01, until_ended=True)

    def wait_settled(self, deadline: float) -> bool:
        """Block until nothing is pending, in flight or unappended (every outcome in the
        log), the loop ended, or ``deadline``; True when settled (a planned release)."""
        return self._progress.wait_until(
            lambda: not self.pending_admissions and not self.in_flight and not self._outbox,
            deadline, step_s=0.01, until_ended=True)

    # lifecycle ------------------------------------------------------------------------
    def start(self, supervisor: Supervisor | None = None) -> None:
        """Run the loop on a thread owned by ``supervisor`` (restarted after a crash)."""
        owner = supervisor if supervisor is not None else \
            Supervisor(self._events, clock=self._time)
        self._worker = owner.spawn(f"shard-{self.shard}", "shard", self.run,
                                   fatal=FATAL_ERRORS)

    def fail(self, error: NereusError) -> None:
        """Never run: FAILED for ``error`` (its log diverged), as ``engine status`` says."""
        self.state = ShardState.FAILED
        self.error = error.message + (f"; recovery: {error.hint}" if error.hint else "")

    def begin_stop(self) -> None:
        """No new claims from now on; keep applying and recording outcomes."""
        if self.state == ShardState.ACTIVE:
            self.state = ShardState.STOPPING
        self._wake.set()

    def finish(self, deadline: float) -> None:
        """Record what is left, apply it, and end the thread (by ``deadline``, a reading
        of the engine's Clock's ``monotonic``)."""
        self._stop.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(max(deadline - self._time.monotonic(), 0.1))

    def _event(self, event: str, /, **fields: object) -> None:
        safe_event(self._events, event, **fields)

    # the loop -------------------------------------------------------------------------
    def run(self) -> None:
        """The loop (a supervised worker body; called again after a crash).

        A restart resumes: recovery runs again only if it never finished; claims, dispatched
        attempts, synced events not yet acted on and records not yet appended are kept on
        this object, so an outage of the Shard Log (an append or a read that fails) costs a
        pause, not an UNCERTAIN attempt.
        """
        try:
            if not self._activated:
                self._recover()
            elif self.state == ShardState.DEGRADED:
                self.state = ShardState.ACTIVE
                self._event("shard_resumed", shard=str(self.shard), epoch=self.epoch)
            self.error = None
            while not self._stop.is_set():
                if self._owner.fenced is not None and not self.in_flight and not self._outbox:
                    self._event("shard_released", shard=str(self.shard),
                                reason=self._owner.fenced)
                    return  # fenced, and every answer this owner held is in the log
                self._iterate()
            self._drain()
            self.state = ShardState.STOPPED
            self.checkpoints.refuse_pending()
        except Exception as exc:  # the supervisor logs, counts and restarts; say why here
            self.error = f"{type(exc).__name__}: {exc}"
            if self._stop.is_set() or isinstance(exc, FATAL_ERRORS):
                self.state = ShardState.FAILED
                self._event("shard_failed", level="error", shard=str(self.shard),
                            reason=self.error)
            elif self.state == ShardState.ACTIVE:
                self.state = ShardState.DEGRADED  # no claims until the loop runs again
            raise
        finally:
            self._progress.notify()

    def _iterate(self) -> None:
        """One turn: apply, outcomes, checkpoint, schedule, append, expire; idle: rest."""
        flow = self._admissions
        began, applied_before = self.clock.source.monotonic(), self._applier.applied_records
        self._wake.clear()  # a wake-up from here on ends the rest below at once
        progressed = self._applier.apply(until_empty=False)
        progressed |= flow.take_outcomes()
        self.checkpoints.maybe_take(self.applied_position, self.epoch)
        scheduling = self.scheduling_hold() is None
        flow.round_work = 0
        if scheduling:
            progressed |= flow.schedule()
        if self.state == ShardState.ACTIVE:  # retention: the live owner sweeps what is due
            progressed |= self._sweeps.maybe_sweep(self.epoch)
            progressed |= self._backfills.maybe_backfill(self.epoch)
        progressed |= self._outbox.flush()
        flow.expire_claims()
        if self._policy_changed.is_set() and self.state == ShardState.ACTIVE:
            self._policy_changed.clear()
            self._recovery().replicate_lane_policy(self.lanes_wanted)
        if progressed:
            flow.pace.turn_took((self.clock.source.monotonic() - began) * 1000,
                                self._applier.applied_records - applied_before
                                + flow.round_work)
            self.idle.active()
        else:
            busy = (not scheduling or len(flow.book) or self._outbox  # paused, a lease, claims,
                    or self.checkpoints.flushing)  # appends to make, a pre-flush running
            self.idle.rest(0.0 if busy else flow.quiet_for_s(self.settings.idle_wait_s),
                            lambda: self._applier.apply(until_empty=False))

    def due_waiting(self, lane: str) -> str | None:
        """Why the lane's due work on this shard waits now: the loop's own hold, the
        clock, or what its last round said of the lane (None: it said nothing)."""
        return (self.scheduling_hold() or self._admissions.waiting
                or self._admissions.lane_waiting.get(lane))

    def scheduling_hold(self) -> str | None:
        """Why the loop claims nothing now (its state, an operator's pause, the lease), or
        None when it schedules."""
        if self.state != ShardState.ACTIVE:  # why it is not, when the loop knows
            return f"shard {self.state.value}: " + (
                self.error or "it schedules only while ACTIVE")
        if self.store.get(keys.META_PAUSED) is not None:
            return "paused by an operator (SHARD_PAUSE; `nereus shard resume` resumes it)"
        return self._owner.lease_problem()

    def explain(self, delay_message_id: str) -> MessageExplanation:
        """The scheduler's gates for one message now (``nereus message explain``)."""
        return explain_message(self.store, self.log, str(self.shard), self._admissions,
                               delay_message_id, shard_hold=self.scheduling_hold())

    def _on_applied(self, applied: Applied) -> None:
        if applied.members:  # a PUBLISH_BATCH: each member acted on as if it came alone
            for member in applied.members:
                self._on_applied(member)
            return
        self._admissions.on_applied(applied)
        record = applied.record
        # exact types, not isinstance: this runs for every applied record, and isinstance
        # against a msgspec Struct class that does not match costs ~70 ns
        kind = type(record)
        if kind in OBSERVED:
            self.metrics.observe(applied, self._admissions.book)
        if kind is not CheckpointMark:
            self.checkpoints.changed += 1
        if kind is ActivationBarrier and not applied.duplicate and \
                applied.result.status == ResultStatus.APPLIED and self._activated:
            assert isinstance(record, ActivationBarrier)
            if self._owner.is_rival(record):
                self._fence(f"owner {record.owner_id} activated epoch {record.fencing_epoch} "
                            f"at position {applied.result.position}")

    def _fence(self, why: str) -> None:
        """Another owner is live: claim nothing more, send nothing more, let the shard go.

        Claims not yet handed to a publisher are released (their admissions, if applied,
        are STALE FENCED); attempts already with a publisher are refused at its gate and
        declined. The loop ends once their answers are in the log (evidence only now).
        """
        if self._owner.fenced is not None:
            return
        self.metrics.fenced()
        self._activated = True  # nothing to recover again: this owner is done here
        self._owner.fenced = why
        self.state = ShardState.FENCED
        self._admissions.let_go()
        self._event("shard_fenced", level="warning", shard=str(self.shard),
                    owner_id=self.owner_id, epoch=self.epoch, reason=why)

    # recovery and shutdown ------------------------------------------------------------
    def _recover(self) -> None:
        self.state = ShardState.RECOVERING
        recovery = self._recovery()
        fenced = recovery.activate()
        # records replayed here count towards [checkpoints] every_records like any other
        # (a count, not a difference of positions: Pulsar's are ledger << 32 | entry)
        self.checkpoints.changed += recovery.replayed
        if fenced is not None:
            self._fence(fenced)
            return
        fences = {name: publisher.fences for name, publisher in self._publishers.items()}
        for obligation in recovery.settle_orphans(fences, self._admissions.expected_mac):
            self._admissions.open_obligation(obligation)
        recovery.replicate_lane_policy(self.lanes_wanted)
        self._activated = True
        self.state = ShardState.ACTIVE
        self._event("shard_active", shard=str(self.shard), epoch=self.epoch,
                    applied_position=self.applied_position, replayed=recovery.replayed)

    def _recovery(self) -> Recovery:
        return Recovery(self.shard, self.runner, self._outbox, self._owner, clock=self.clock,
                        new_id=self.new_id, events=self._events)

    def _drain(self) -> None:
        if self.state == ShardState.ACTIVE:
            self.state = ShardState.STOPPING
        for _ in range(3):
            self._apply_to_end()
            self._admissions.take_outcomes()
            self._outbox.flush()
        self._apply_to_end()

    def _apply_to_end(self) -> None:
        """Apply up to the log's end as it is now, not until a read finds nothing (under
        steady load that chases the tail: a planned move waited 2-9 s in it)."""
        end = self.log.end_position()
        while self.runner.next_position < end and self._applier.apply(until_empty=False):
            pass
