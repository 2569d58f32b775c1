"""One shard's owner loop: apply -> outcomes -> schedule, on one thread.

Each iteration:

1. **apply**: the runner applies whatever the log holds in synced group commits. Only
   after a batch is synced are its events handled: a winning PUBLISH_ADMISSION of ours
   whose claim, owner, epoch, time gate and lane readiness still hold is handed to the
   lane publisher (durable PUBLISHING happens-before the producer call); a stale one
   revokes its claim; an applied outcome releases the claim and its permits.
2. **outcomes**: publisher results (and our own declines) become PUBLISH_OUTCOME records
   appended to the Shard Log; the callback never touches RocksDB.
3. **schedule**: one planner round (gates, DRR, permits) claims due work and appends the
   admissions (and CLAIM_RESULT expiries) in one group append. An enqueue failure is
   retried with the same bytes, never a new attempt identity and never a direct send.

On start the loop replays from the stored applied position, appends an
ACTIVATION_BARRIER with the next fencing epoch and waits until it is applied, then marks
every attempt still PUBLISHING as UNKNOWN (no live first-send gate survives a restart;
it is never retried automatically or reported NOT_PUBLISHED) before accepting work.

Time: every deadline (claims, the clock-ahead hold, checkpoint intervals, append retries,
stop and wait deadlines) is read from the Trusted UTC clock's ``source``, the engine's one
``Clock``; only the wake-up poll (new records appended by other processes) is a real wait.
Others see the loop through ``status()``, ``wake()`` and the ``wait_*`` methods.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from nereus.adapters.checkpoints import Taken, new_checkpoint_id, snapshot
from nereus.adapters.runner import ShardRunner
from nereus.adapters.shardlog.protocol import LogRecord, Receipt, ShardLog
from nereus.engine.checkpointer import Checkpointer, Job
from nereus.engine.clock import TrustedClock
from nereus.engine.destinations.protocol import PublishRequest, PublishResult
from nereus.engine.event_log import EventLog, null_event_log, safe_event
from nereus.engine.publisher import LanePublisher
from nereus.engine.scheduler.claims import Claim, ClaimBook
from nereus.engine.scheduler.drr import STATE_KEY, dump_state, load_state
from nereus.engine.scheduler.permits import Permits
from nereus.engine.scheduler.planner import FetchPayload, Owner, Planner, PlannerSettings
from nereus.engine.shard_status import ENDED_STATES, SETTLED_STATES, ShardState, ShardStatus
from nereus.engine.supervisor import Supervised, Supervisor
from nereus.errors import LogCorruption, LogDiverged, NereusError
from nereus.evidence_mac import evidence_mac
from nereus.machine import Applied, Limits, Reason
from nereus.records import (
    ActivationBarrier,
    AttemptResolve,
    AttemptState,
    CheckpointMark,
    Disposition,
    LaneConfig,
    Outcome,
    PublishAdmission,
    PublishOutcome,
    ResultStatus,
    Schedule,
    encode,
)
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import (
    Activation,
    Attempt,
    Lane,
    Obligation,
    Result,
    decode_value,
)

APPEND_RETRIES = 5
RECENT_RESULTS = 4_096  # results kept for waiting clients beyond the ones they expect
TIME_HOLD_MS = 1_000  # no claims this long after an admission was refused as clock-ahead
# failures no restart can repair: the loop ends FAILED and says why
FATAL_ERRORS: tuple[type[BaseException], ...] = (LogCorruption, LogDiverged)


@dataclass(frozen=True, slots=True)
class LoopSettings:
    poll_interval_s: float = 0.005
    batch_records: int = 2_000
    planner: PlannerSettings = field(default_factory=PlannerSettings)


class ShardLoop:
    def __init__(
        self,
        shard: ShardId,
        store: ShardStore,
        log: ShardLog,
        *,
        limits: Limits,
        clock: TrustedClock,
        publishers: dict[str, LanePublisher],
        permits: Permits,
        owner_id: str,
        new_id: Callable[[], str],
        settings: LoopSettings = LoopSettings(),
        events: EventLog = null_event_log,
        checkpointer: Checkpointer | None = None,
        staging: Path | None = None,
        fetch_payload: FetchPayload | None = None,
        lane_leads: Mapping[str, int] | None = None,
        lane_ordered: Mapping[str, bool] | None = None,
        evidence_key: bytes = b"",
    ) -> None:
        self.shard = shard
        self.store = store
        self.log = log
        self.clock = clock
        self._time = clock.source  # the engine's one Clock: every deadline below reads it
        self.publishers = publishers
        self.permits = permits
        self.owner_id = owner_id
        self.new_id = new_id
        self.settings = settings
        self._events = events
        self.runner = ShardRunner(store, log, limits=limits, batch_records=settings.batch_records)
        # notified on every applied batch and every state change (wait_applied, wait_active)
        self._progress = threading.Condition()
        self._state = ShardState.STARTING
        self.epoch = 0
        self.error: str | None = None
        self._drr = load_state(store.get(STATE_KEY))
        # each lane's handoff lead as its destination really has it (nereus.toml)
        self.lane_leads: dict[str, int] = dict(lane_leads or {})
        self.lane_ordered: dict[str, bool] = dict(lane_ordered or {})
        self._evidence_key = evidence_key  # the route's secret: records' evidence MACs
        self.planner = Planner(
            store, permits, self._drr, settings.planner, new_id, fetch_payload=fetch_payload,
            leads=self.lane_leads,
            record_limits={name: publisher.destination.max_record_bytes
                           for name, publisher in publishers.items()})
        self._book = ClaimBook(self.permits, self._forget_claim)
        # ordered head: the (lane, key) of every open obligation (PUBLISHING or UNKNOWN),
        # kept exactly from the obligation writes of each applied record, whatever ended
        # the attempt (outcome, operator, break); claims add their keys per round
        self._obligation_keys: dict[str, tuple[str, str]] = {}  # attempt id -> (lane, key)
        self._outcomes: queue.SimpleQueue[PublishResult] = queue.SimpleQueue()
        # held across a crash and a restart of the loop (never in a call's locals):
        # applied and synced events not yet acted on, and system records (outcomes,
        # admissions, claim results) encoded but not yet in the log, retried as the very
        # same bytes until the log takes them
        self._pending_events: deque[Applied] = deque()
        # while a client waits (``watching``), the results the loop applies: by the
        # positions it expects (None until applied), and the most recent others (a record
        # can be applied between its append and the client's ``expect``); guarded by
        # ``_progress``; the apply observer reads ``_watching`` without the lock
        self._watching = 0
        self._awaited: dict[int, Result | None] = {}
        self._recent: OrderedDict[int, Result] = OrderedDict()
        self._outbox: list[tuple[str | None, bytes]] = []  # (attempt id of an admission, bytes)
        self._activated = False
        # why this shard admits nothing right now though it is ACTIVE (None: it may)
        self.waiting: str | None = None
        self._time_hold_until_mono_ms = 0
        self._fenced: str | None = None  # why another owner is live, once one is
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.admissions = 0
        self.publish_outcomes = 0
        self.checkpointer = checkpointer
        self.staging = staging
        self._checkpoint_requests: queue.SimpleQueue[Future[Taken]] = queue.SimpleQueue()
        self._records_since_checkpoint = 0
        self._last_checkpoint_mono = self._time.monotonic()
        self._worker: Supervised | None = None

    @property
    def state(self) -> ShardState:
        return self._state

    @state.setter
    def state(self, state: ShardState) -> None:
        with self._progress:
            self._state = state
            self._progress.notify_all()

    def status(self) -> ShardStatus:
        """This loop now: state, epoch, applied position, claims and what is in flight."""
        return ShardStatus(
            shard=self.shard, state=self._state, epoch=self.epoch,
            applied_position=self.applied_position, claims=len(self._book),
            in_flight=self.in_flight, pending_admissions=self.pending_admissions,
            admissions=self.admissions, publish_outcomes=self.publish_outcomes,
            error=self.error, waiting=self.waiting)

    def wake(self) -> None:
        """Look at the log now (records were just appended) instead of at the next poll."""
        self._wake.set()

    def _event(self, event: str, /, **fields: object) -> None:
        safe_event(self._events, event, **fields)

    # lifecycle ------------------------------------------------------------------------
    def start(self, supervisor: Supervisor | None = None) -> None:
        """Run the loop on a thread owned by ``supervisor`` (restarted after a crash)."""
        owner = supervisor if supervisor is not None else \
            Supervisor(self._events, clock=self._time)
        self._worker = owner.spawn(f"shard-{self.shard}", "shard", self.run,
                                   fatal=FATAL_ERRORS)

    def fail(self, error: NereusError) -> None:
        """Never run: the shard is FAILED for ``error`` (its log diverged from its state),
        and says so in ``engine status`` until it is recovered."""
        self.state = ShardState.FAILED
        self.error = error.message + (f"; recovery: {error.hint}" if error.hint else "")

    def begin_stop(self) -> None:
        """No new claims from now on; keep applying and recording outcomes."""
        if self._state == ShardState.ACTIVE:
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

    def wait_active(self, timeout_s: float) -> bool:
        """Block until recovery has ended (True when ACTIVE; False when FAILED, FENCED or
        ``timeout_s`` passed on the engine's Clock)."""
        end = self._time.monotonic() + timeout_s
        with self._progress:
            while self._state not in SETTLED_STATES:
                remaining = end - self._time.monotonic()
                if remaining <= 0:
                    return False
                self._progress.wait(min(remaining, 0.1))
            return self._state == ShardState.ACTIVE

    @property
    def applied_position(self) -> int | None:
        return self.runner.next_position - 1 if self.runner.next_position else None

    @property
    def pending_admissions(self) -> int:
        return self._book.undispatched

    @property
    def in_flight(self) -> int:
        return len(self._book.dispatched)

    def wait_drained(self, deadline: float) -> bool:
        """Block until every claim's admission has been acted on (handed to a publisher
        or declined), the loop has ended, or the Clock's ``monotonic`` reads ``deadline``;
        True when nothing is pending. The engine's stop waits here before its publishers."""
        with self._progress:
            while self.pending_admissions:
                remaining = deadline - self._time.monotonic()
                if remaining <= 0 or self._state in ENDED_STATES:
                    return not self.pending_admissions
                self._progress.wait(min(remaining, 0.01))
        return True

    def wait_applied(self, position: int, timeout_s: float) -> bool:
        """Block until ``position`` is applied and synced (or the timeout passes)."""
        end = self._time.monotonic() + timeout_s
        with self._progress:
            while self.runner.next_position <= position:
                remaining = end - self._time.monotonic()
                if remaining <= 0 or self._state in ENDED_STATES:
                    return self.runner.next_position > position
                self._progress.wait(min(remaining, 0.1))
        return True

    @contextmanager
    def watching(self) -> Iterator[None]:
        """While inside, the loop keeps the results it applies for ``expect`` and
        ``await_result`` (enter it before appending what you will wait for)."""
        with self._progress:
            self._watching += 1
        try:
            yield
        finally:
            with self._progress:
                self._watching -= 1
                if not self._watching:
                    self._recent.clear()

    def expect(self, positions: Sequence[int]) -> None:
        """Keep the results the loop applies at ``positions`` for ``await_result``."""
        with self._progress:
            for position in positions:
                self._awaited[position] = self._recent.pop(position, None)

    def await_result(self, position: int, deadline: float) -> Result | None:
        """The result the loop applied (and synced) at an ``expect``-ed position, as it
        applied it — no store read — or None when the monotonic ``deadline`` passes, the
        loop ends first, or the position was applied before it was expected (the caller
        then reads the stored result). The position is forgotten either way."""
        with self._progress:
            try:
                while (found := self._awaited.get(position)) is None:
                    if position not in self._awaited or self._state in ENDED_STATES or \
                            self.runner.next_position > position:
                        return self._awaited.get(position)
                    remaining = deadline - self._time.monotonic()
                    if remaining <= 0:
                        return None
                    self._progress.wait(min(remaining, 0.1))
                return found
            finally:
                self._awaited.pop(position, None)

    def request_checkpoint(self) -> Future[Taken]:
        """A checkpoint taken between two batches; the Future resolves once catalogued."""
        future: Future[Taken] = Future()
        if self.checkpointer is None or self.staging is None:
            future.set_exception(RuntimeError("this engine has no object store for checkpoints"))
            return future
        self._checkpoint_requests.put(future)
        self._wake.set()
        return future

    def _maybe_checkpoint(self) -> None:
        if self.checkpointer is None or self.staging is None:
            return
        requests: list[Future[Taken]] = []
        while True:
            try:
                requests.append(self._checkpoint_requests.get_nowait())
            except queue.Empty:
                break
        settings = self.checkpointer.settings
        changed = self._records_since_checkpoint
        due = changed > 0 and (
            (settings.every_records and changed >= settings.every_records)
            or (settings.every_seconds
                and self._time.monotonic() - self._last_checkpoint_mono >= settings.every_seconds)
        )
        if not requests and not due:
            return
        checkpoint_id = new_checkpoint_id(self.applied_position, uuid.uuid4().hex[:8])
        try:
            directory = snapshot(self.store, self.staging, checkpoint_id)
        except Exception as exc:
            for future in requests:
                future.set_exception(exc)
            raise
        self.checkpointer.submit(Job(self.shard, directory, checkpoint_id, self.log,
                                     self.clock.wall_ms(), self.owner_id, self.epoch, requests))
        self._records_since_checkpoint = 0
        self._last_checkpoint_mono = self._time.monotonic()

    def reply(self, result: PublishResult) -> None:
        """A publisher's answer (any thread): becomes a PUBLISH_OUTCOME on this loop."""
        self._outcomes.put(result)
        self._wake.set()

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
            elif self._state == ShardState.DEGRADED:
                self.state = ShardState.ACTIVE
                self._event("shard_resumed", shard=str(self.shard), epoch=self.epoch)
            self.error = None
            while not self._stop.is_set():
                if self._fenced is not None and not self._book.dispatched and not self._outbox:
                    self._event("shard_released", shard=str(self.shard), reason=self._fenced)
                    return  # fenced, and every answer this owner held is in the log
                progressed = self._apply(until_empty=False)
                progressed |= self._flush_outcomes()
                self._maybe_checkpoint()
                if self._state == ShardState.ACTIVE and not self._paused():
                    progressed |= self._schedule()
                progressed |= self._flush_outbox()
                self._expire_claims()
                if not progressed:
                    self._wake.wait(self.settings.poll_interval_s)
                self._wake.clear()
            self._drain()
            self.state = ShardState.STOPPED
            while True:
                try:
                    self._checkpoint_requests.get_nowait().set_exception(
                        RuntimeError("the engine is stopping"))
                except queue.Empty:
                    break
        except Exception as exc:  # the supervisor logs, counts and restarts; say why here
            self.error = f"{type(exc).__name__}: {exc}"
            if self._stop.is_set() or isinstance(exc, FATAL_ERRORS):
                self.state = ShardState.FAILED
                self._event("shard_failed", level="error", shard=str(self.shard),
                            reason=self.error)
            elif self._state == ShardState.ACTIVE:
                self.state = ShardState.DEGRADED  # no claims until the loop runs again
            raise
        finally:
            with self._progress:
                self._progress.notify_all()

    def _append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        """Append with retries of the very same bytes (dedup makes a repeat harmless)."""
        delay = 0.01
        for attempt in range(APPEND_RETRIES):
            try:
                return list(self.log.append(payloads))
            except OSError as exc:
                if attempt == APPEND_RETRIES - 1:
                    raise
                self._event("append_retry", shard=str(self.shard), error=str(exc))
                self._time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _apply(self, *, until_empty: bool = True) -> bool:
        """Apply what the log holds; returns whether anything was applied.

        In the loop (``until_empty=False``) a batch shorter than ``batch_records`` ends the
        call instead of one more read that finds nothing: an empty read of a remote log
        costs a round trip or waits for records (the Kafka Shard Log polls up to 50 ms), and
        publisher outcomes and the next claims must not queue behind it every iteration.
        Measured Kafka -> Kafka (bench/brokers.py, 20,000 due at once): 2,281 -> 6,211
        publishes/s per shard.
        """
        progressed = self._act_on_pending()  # synced before a crash, not yet acted on
        runner = self.runner
        batch: list[Applied] = []
        caught: list[tuple[int, Result]] = []  # results a waiting client expects
        awaited, recent = self._awaited, self._recent

        def observe(record: LogRecord, applied: Applied) -> None:
            batch.append(applied)
            if self._watching:
                caught.append((record.position, applied.result))

        runner.observer = observe
        while True:
            batch.clear()
            caught.clear()
            before = runner.next_position
            try:
                report = runner.step()
            finally:  # acted on only once synced: the runner moves on after its write
                if runner.next_position != before:
                    self._pending_events.extend(batch)
                    if caught:
                        with self._progress:
                            for position, result in caught:
                                if position in awaited:
                                    awaited[position] = result
                                elif self._watching:
                                    recent[position] = result
                            while len(recent) > RECENT_RESULTS:
                                recent.popitem(last=False)
            if not report.records:
                break
            progressed = True
            with self._progress:
                self._progress.notify_all()
            self._act_on_pending()
            if not until_empty and report.records < runner.batch_records:
                break
        return progressed

    def _act_on_pending(self) -> bool:
        """Act on synced events, oldest first; each is taken off before it is handled."""
        pending = self._pending_events
        if not pending:
            return False
        while pending:
            self._on_applied(pending.popleft())
        return True

    def _on_applied(self, applied: Applied) -> None:
        timeline, obligation = keys.TIMELINE[0], keys.OBLIGATION[0]
        for key, value in applied.writes.items():
            first = key[0]
            if first == timeline and value is not None:
                self.planner.note_timeline_put(key)
            elif first == obligation:
                self._note_obligation(key, value)
        record = applied.record
        # exact types, not isinstance: these run for every applied record, and isinstance
        # against a msgspec Struct class that does not match costs ~70 ns
        kind = type(record)
        if kind is not CheckpointMark:
            self._records_since_checkpoint += 1
        if applied.duplicate or record is None or kind is Schedule:
            return
        status = applied.result.status
        if isinstance(record, PublishAdmission):
            claim = self._book.for_attempt(record.attempt_id)
            if status == ResultStatus.APPLIED:
                self.admissions += 1
                if record.attempt_id in self._book.dispatched:
                    return  # acted on before a crash; never handed over twice
                if claim is not None and (why := self._gate_closed(claim)) is None:
                    self._book.dispatch(record.attempt_id)
                    template = claim.template
                    self.publishers[claim.lane].submit(
                        PublishRequest(record.attempt_id, template, self.evidence_mac(
                            template.delay_message_id, template.generation, record.attempt_id)),
                        self.reply, self.live_owner_gate)
                elif record.owner_id == self.owner_id:
                    reason = why if claim is not None else "the claim ended before admission"
                    self._decline(record.attempt_id, f"owner declined before any send: {reason}")
            else:
                if claim is not None:
                    self._book.release(claim)
                if applied.result.reason == Reason.TIME_EVIDENCE and \
                        record.owner_id == self.owner_id:
                    self._hold_for_time(applied.result.detail or "")
        elif isinstance(record, PublishOutcome | AttemptResolve):
            claim = self._book.for_attempt(record.attempt_id)
            if claim is not None:
                self._book.release(claim)
                self.publish_outcomes += 1
        elif isinstance(record, ActivationBarrier) and status == ResultStatus.APPLIED and \
                self._activated and (record.owner_id, record.fencing_epoch) != (
                    self.owner_id, self.epoch):
            self._fence(f"owner {record.owner_id} activated epoch {record.fencing_epoch} "
                        f"at position {applied.result.position}")

    def evidence_mac(self, delay_message_id: str, generation: int, attempt_id: str) -> str:
        """The MAC this attempt's destination record carries (and evidence must show)."""
        return evidence_mac(self._evidence_key, delay_message_id, generation, attempt_id)

    def live_owner_gate(self) -> str | None:
        """Why this owner may not call a producer now, or None.

        Read from the *applied* activation (``meta/activation``), not from this loop's
        memory: once another owner's barrier is applied, no further producer call leaves
        this owner. The lane publisher asks this for every job just before its call.
        """
        if self._fenced is not None:
            return f"owner {self.owner_id} is fenced: {self._fenced}"
        raw = self.store.get(keys.META_ACTIVATION)
        active = None if raw is None else decode_value(raw, Activation)
        if active is None or (active.owner_id, active.fencing_epoch) != (self.owner_id,
                                                                         self.epoch):
            live = "nobody" if active is None else \
                f"{active.owner_id} epoch {active.fencing_epoch}"
            return f"owner {self.owner_id} epoch {self.epoch} is not the live owner ({live})"
        return None

    def _fence(self, why: str) -> None:
        """Another owner is live: claim nothing more, send nothing more, let the shard go.

        Claims not yet handed to a publisher are released (their admissions, if applied,
        are STALE FENCED); attempts already with a publisher are refused at its gate and
        declined. The loop ends once their answers are in the log (evidence only now).
        """
        if self._fenced is not None:
            return
        self._activated = True  # nothing to recover again: this owner is done here
        self._fenced = why
        self.state = ShardState.FENCED
        self._outbox = [item for item in self._outbox if item[0] is None]
        self._book.release_undispatched()
        self._event("shard_fenced", level="warning", shard=str(self.shard),
                    owner_id=self.owner_id, epoch=self.epoch, reason=why)

    def _gate_closed(self, claim: Claim) -> str | None:
        if self._state != ShardState.ACTIVE:
            return f"the shard is {self._state}"
        if claim.fencing_epoch != self.epoch:
            return "the fencing epoch changed"
        if (why := self.live_owner_gate()) is not None:
            return why
        if not self._book.is_current(claim):
            return "the claim was revoked"
        if self._time.monotonic_ms() > claim.deadline_mono_ms:
            return "the claim deadline passed"
        if not self.clock.now().is_due(claim.template.action_at_ms):
            return "the time gate no longer holds"
        publisher = self.publishers.get(claim.lane)
        if publisher is None or not publisher.ready:
            return f"lane {claim.lane} is NOT READY"
        return None

    def _wait(self, why: str) -> None:
        if why != self.waiting:
            self._event("shard_waiting", level="warning", shard=str(self.shard), reason=why)
        self.waiting = why

    def _hold_for_time(self, detail: str) -> None:
        """An admission of ours was refused because our decision led the broker's clock by
        more than the shard allows: our clock is ahead. Claim nothing for a while (no flood
        of refused admissions) and say why."""
        self._time_hold_until_mono_ms = self._time.monotonic_ms() + TIME_HOLD_MS
        self._wait(f"this engine's clock leads the Shard Log's broker clock: {detail}")

    def _decline(self, attempt_id: str, why: str) -> None:
        self._outcomes.put(PublishResult(attempt_id, Outcome.NOT_PUBLISHED,
                                         Disposition.LANE_UNAVAILABLE, why))

    def _forget_claim(self, delay_message_id: str) -> None:
        """A released claim's local row goes (unsynced: claims are local state)."""
        self.store.write({keys.claim_key(delay_message_id): None}, sync=False)

    def _note_obligation(self, key: bytes, value: bytes | None) -> None:
        """An obligation opened (its key now holds the ordered head) or closed."""
        attempt_id = key[1:].split(b"\x00", 1)[1].decode()
        if value is None:
            self._obligation_keys.pop(attempt_id, None)
            return
        opened = decode_value(value, Obligation)
        if opened.key is not None:
            self._obligation_keys[attempt_id] = (opened.lane, opened.key)

    def held_keys(self) -> set[tuple[str, str]]:
        """(lane, key) pairs whose ordered head is taken: an open obligation or a claim."""
        return set(self._obligation_keys.values()) | self._book.held_keys()

    def _flush_outcomes(self) -> bool:
        """Publisher results (and declines) as PUBLISH_OUTCOME records, into the log."""
        while True:
            try:
                result = self._outcomes.get_nowait()
            except queue.Empty:
                break
            claim = self._book.for_attempt(result.attempt_id)
            raw = self.store.get(keys.attempt_key(result.attempt_id))
            delay_message_id = (claim.delay_message_id if claim is not None else
                                decode_value(raw, Attempt).delay_message_id if raw else "")
            self._outbox.append((None, encode(PublishOutcome(
                outcome_id=self.new_id(), attempt_id=result.attempt_id,
                delay_message_id=delay_message_id, owner_id=self.owner_id,
                fencing_epoch=self.epoch, outcome=result.outcome,
                disposition=result.disposition, evidence=result.evidence,
            ))))
        return self._flush_outbox()

    def _flush_outbox(self) -> bool:
        """Append every record waiting in the outbox (the same bytes on every retry)."""
        if not self._outbox:
            return False
        self._append([data for _, data in self._outbox])
        self._outbox.clear()
        return True

    def _paused(self) -> bool:
        return self.store.get(keys.META_PAUSED) is not None

    def lanes(self) -> dict[str, Lane]:
        """Replicated lane state for every lane this engine can publish to."""
        found = {}
        for _, raw in self.store.scan_prefix(keys.LANE):
            lane = decode_value(raw, Lane)
            found[lane.name] = lane
        return {name: found.get(name, Lane(name=name)) for name in self.publishers}

    def _schedule(self) -> bool:
        mono = self._time.monotonic_ms()
        problem = self.clock.problem()
        if problem is not None:
            self._wait(f"Trusted UTC is not trusted: {problem}; no admission until it is")
            return False
        if mono < self._time_hold_until_mono_ms:
            return False  # a decision of ours was refused as ahead of the broker: wait
        self.waiting = None
        now = self.clock.now()
        owner = Owner(self.owner_id, str(self.store.path), self.epoch)
        plan = self.planner.round(now, mono, owner, self.lanes(),
                                  lambda lane: self.publishers[lane].ready,
                                  self._book.by_message, self.held_keys(),
                                  self._book.dispatched)
        if not plan.claims and not plan.expiries:
            return False
        local: dict[bytes, bytes | None] = {STATE_KEY: dump_state(self._drr)}
        for claim in plan.claims:
            self._book.track(claim)
            local[keys.claim_key(claim.delay_message_id)] = _encode_claim(claim)
        self.store.write(local, sync=False)
        self._outbox.extend((c.attempt_id, c.admission) for c in plan.claims)
        self._outbox.extend((None, data) for data in plan.expiries)
        return True

    def _expire_claims(self) -> None:
        """Release claims whose deadline passed before their admission was acted on.

        An admission still waiting in the outbox is dropped with its claim. One that was
        applied and won, but whose event was never acted on (a crash in between), is an
        attempt only this owner could have sent and never did: it is declined.
        """
        if not self._book:
            return
        expired = self._book.expired(self._time.monotonic_ms())
        if not expired:
            return
        gone = {claim.attempt_id for claim in expired}
        self._outbox = [item for item in self._outbox if item[0] not in gone]
        for claim in expired:
            self._book.release(claim)
            raw = self.store.get(keys.attempt_key(claim.attempt_id))
            if raw is not None and decode_value(raw, Attempt).state == AttemptState.PUBLISHING:
                self._decline(claim.attempt_id,
                              "owner declined before any send: the claim deadline passed")

    # recovery and shutdown ------------------------------------------------------------
    def _recover(self) -> None:
        self.state = ShardState.RECOVERING
        self.runner.run_until_caught_up()
        # true time is at least the latest decision an applied admission carries: the
        # clock never reads earlier than that, whatever the wall clock says after a restart
        decided = [decode_value(raw, Lane).last_decided_ms
                   for _, raw in self.store.scan_prefix(keys.LANE)]
        if decided and max(decided) > 0:
            self.clock.raise_floor(max(decided))
        self.store.write({k: None for k, _ in self.store.scan_prefix(keys.CLAIM)}, sync=False)
        raw = self.store.get(keys.META_ACTIVATION)
        previous = decode_value(raw, Activation).fencing_epoch if raw else 0
        self.epoch = previous + 1
        barrier_id = self.new_id()
        (receipt,) = self._append([encode(ActivationBarrier(
            barrier_id=barrier_id, owner_id=self.owner_id, fencing_epoch=self.epoch))])
        self.runner.run_until_caught_up(stop_at=receipt.position)
        raw_active = self.store.get(keys.META_ACTIVATION)
        active = None if raw_active is None else decode_value(raw_active, Activation)
        if active is None or active.barrier_id != barrier_id:
            live = "nobody" if active is None else \
                f"{active.owner_id} epoch {active.fencing_epoch}"
            self._fence(f"its activation barrier (epoch {self.epoch}) was fenced; the live "
                        f"owner is {live}")
            return
        orphans: list[bytes] = []
        for key, raw_obligation in self.store.scan_prefix(keys.OBLIGATION):
            obligation = decode_value(raw_obligation, Obligation)
            delay_message_id = key[1:].split(b"\x00", 1)[0].decode()
            if obligation.key is not None:
                self._obligation_keys[obligation.attempt_id] = (obligation.lane, obligation.key)
            if obligation.state == AttemptState.PUBLISHING:
                orphans.append(encode(PublishOutcome(
                    outcome_id=self.new_id(), attempt_id=obligation.attempt_id,
                    delay_message_id=delay_message_id, owner_id=self.owner_id,
                    fencing_epoch=self.epoch, outcome=Outcome.UNKNOWN,
                    evidence=f"recovery: owner {self.owner_id} activated epoch {self.epoch}; "
                    "no live first-send gate survived the restart, the send may have happened",
                )))
        if orphans:
            self._append(orphans)
            self.runner.run_until_caught_up()
            self._event("recovered_unknown", shard=str(self.shard), attempts=len(orphans))
        self._sync_lane_policy()
        self._activated = True
        self.state = ShardState.ACTIVE
        self._event("shard_active", shard=str(self.shard), epoch=self.epoch,
                    applied_position=self.applied_position)

    def _sync_lane_policy(self) -> None:
        """Replicate each configured lane's handoff lead and ordering into its policy.

        Apply reads them from the replicated lane (actionAt = deliverAt - lead; the ordered
        head), so they must say what the configuration, and the destination, really do.
        The state machine refuses a change that messages already rely on (a lower lead under
        SCHEDULED messages: LEAD_IN_USE; ORDERED under unfinished unordered ones:
        ORDERING_IN_USE): then this owner says so in its log, and its planner still waits
        for deliverAt less the lead the destination has.
        """
        records: dict[str, tuple[str, LaneConfig]] = {}
        for name in sorted(set(self.lane_leads) | set(self.lane_ordered)):
            raw = self.store.get(keys.lane_key(name))
            lane = decode_value(raw, Lane) if raw else Lane(name=name)
            changes: dict[str, int | bool] = {}
            lead = self.lane_leads.get(name, 0)
            if lane.handoff_lead_ms != lead:
                changes["handoff_lead_ms"] = lead
            if lane.ordered != self.lane_ordered.get(name, False):
                changes["ordered"] = self.lane_ordered.get(name, False)
            if not changes:
                continue
            listed = ",".join(f"{k}={v}" for k, v in changes.items())
            key = f"config:{name}:{listed}:{self.owner_id}:{self.epoch}"
            records[name] = (listed, LaneConfig(
                lane=name, operator=f"engine {self.owner_id}",
                reason=f"lane {name} as configured: {listed}", idempotency_key=key,
                **changes))  # type: ignore[arg-type]
        if not records:
            return
        self._append([encode(record) for _, record in records.values()])
        self.runner.run_until_caught_up()
        for name, (listed, record) in records.items():
            raw = self.store.get(keys.result_key(f"m/{record.idempotency_key}"))
            result = None if raw is None else decode_value(raw, Result)
            if result is not None and result.status == ResultStatus.APPLIED:
                self._event("lane_policy_replicated", shard=str(self.shard), lane=name,
                            changes=listed)
            else:
                self._event("lane_policy_refused", level="error", shard=str(self.shard),
                            lane=name, changes=listed,
                            detail=None if result is None else result.detail)

    def _drain(self) -> None:
        if self._state == ShardState.ACTIVE:
            self.state = ShardState.STOPPING
        for _ in range(3):
            self._apply()
            self._flush_outcomes()
        self._apply()


def _encode_claim(claim: Claim) -> bytes:
    """The persisted claim: everything but the payload bytes (a large payload stays in the
    object store; the in-memory claim holds the materialised template)."""
    import msgspec

    stored = msgspec.structs.replace(
        claim, template=msgspec.structs.replace(claim.template, payload=b""))
    return msgspec.msgpack.encode(stored)

