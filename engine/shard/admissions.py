"""A shard owner's admissions, from claim to settlement: the admission executor.

A planner round claims due work with no attempt identity; here each new claim's
PUBLISH_ADMISSION is prepared with a new attempt id (``scheduler/admission.py``) and those
exact bytes, with any CLAIM_RESULT expiries, go to the outbox for one group append (a retry
resends them). Only once a batch is synced are its events acted on: a winning admission of
ours whose claim, owner, epoch, time gate and lane readiness still hold goes to its lane
publisher (durable PUBLISHING happens-before the producer call); otherwise this owner, the
only one that could send for that attempt id, declines it (NOT_PUBLISHED LANE_UNAVAILABLE).
Stale admissions, applied outcomes and expired claim deadlines release claims and permits;
the ordered head is the keys of open obligations and live claims. Loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from nereus.adapters.backends.destination.protocol import PublishRequest
from nereus.engine.publishing.lane_publisher import LanePublisher
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.engine.scheduler.admission import handover_refusal, prepare_admission
from nereus.engine.scheduler.claim_limits import quota_left, record_refusal
from nereus.engine.scheduler.claims import (
    Claim,
    ClaimBook,
    ClaimWatch,
    LocalRows,
    Revocation,
    encode_claim,
)
from nereus.engine.scheduler.drr import STATE_KEY, dump_state
from nereus.engine.scheduler.explanation import ExplainInputs
from nereus.engine.scheduler.ordered_blocker import ordered_blocker
from nereus.engine.scheduler.pace import TurnPace
from nereus.engine.scheduler.permits import Permits
from nereus.engine.scheduler.planner import Planner
from nereus.engine.shard.evidence_ring import EvidenceRing
from nereus.engine.shard.loop_status import ShardState
from nereus.engine.shard.outbox import Outbox
from nereus.engine.shard.ownership import Ownership
from nereus.engine.shard.progress import ShardProgress
from nereus.evidence_mac import ExpectedMac, evidence_mac
from nereus.machine import Applied, Reason
from nereus.machine.events import (
    Admitted,
    AttemptSettled,
    ClaimRevoked,
    ObligationClosed,
    ObligationOpened,
    WorkScheduled,
)
from nereus.records import (
    AttemptState,
    Outcome,
    PublishAdmission,
    PublishOutcome,
    encode,
)
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Lane, Message, Obligation, decode_value
from nereus.trusted_time import TrustedTime

TIME_HOLD_MS = 1_000  # no claims this long after an admission was refused as clock-ahead


class AdmissionFlow:
    """One owner's claims on one shard and what became of their admissions."""

    def __init__(self, shard: ShardId, store: ShardStore, *, clock: TrustedClock,
                 planner: Planner, permits: Permits, publishers: Mapping[str, LanePublisher],
                 ownership: Ownership, outbox: Outbox, progress: ShardProgress,
                 events: EventLog, evidence_keys: EvidenceRing, new_id: Callable[[], str],
                 watch: ClaimWatch | None = None) -> None:
        self._shard = shard
        self._shard_text = str(shard)  # what each publish request names
        self._store = store
        self._clock = clock
        self._time = clock.source
        self.planner = planner
        self.book = ClaimBook(permits, self._forget_claim, watch)
        self._publishers = publishers
        self._ownership = ownership
        self._outbox = outbox
        self._progress = progress
        self._events = events
        self._evidence_keys = evidence_keys  # the route's secret: records' evidence MACs
        self._new_id = new_id
        self._obligation_keys: dict[str, tuple[str, str]] = {}  # attempt id -> (lane, key)
        # released claims' rows go with the next round's claims or at the end of the turn
        self._local = LocalRows(store)
        self._gate_memo: tuple[int, str | None, TrustedTime] | None = None  # see _gate_closed
        self.admissions = 0  # admissions of this owner applied as winners
        self.publish_outcomes = 0  # outcomes that released one of its claims
        self.waiting: str | None = None  # why it admits nothing right now (None: it may)
        # why each lane's due work waited in the last round (``RoundPlan.waiting``)
        self.lane_waiting: dict[str, str] = {}
        self._time_hold_until_mono_ms = 0
        self._quiet_until_ms: int | None = 0  # see quiet_for_s
        # how much a round may claim so the shard's turns stay short (the loop reports
        # each turn's time and work)
        self.pace = TurnPace(planner.settings.turn_target_ms)
        self.round_work = 0  # claims and expiries of the last round

    # one scheduling round -----------------------------------------------------------
    def schedule(self) -> bool:
        """One planner round; the admissions prepared for its claims (each with a new
        attempt id) and its expiries go to the outbox."""
        mono = self._time.monotonic_ms()
        self._quiet_until_ms = 0  # until this round says otherwise: look again soon
        problem = self._clock.problem()
        if problem is not None:
            self._wait(f"Trusted UTC is not trusted: {problem}; no admission until it is")
            return False
        if mono < self._time_hold_until_mono_ms:
            return False  # a decision of ours was refused as ahead of the broker: wait
        self.waiting = None
        publishers = self._publishers
        now = self._clock.now()
        plan = self.planner.round(now, mono, self._ownership.owner(),
                                  self.lanes(), lambda lane: publishers[lane].ready,
                                  self.book.by_message, self.held_keys(),
                                  self.book.dispatched_claims,
                                  allowance=self.pace.allowance())
        self.lane_waiting = plan.waiting
        self.round_work = len(plan.claims) + len(plan.expiries)
        if not plan.claims and not plan.expiries:
            if not plan.waiting:  # nothing due, or all of it claimed: quiet until the next
                self._quiet_until_ms = plan.next_due_ms if plan.next_due_ms is not None \
                    else None
            return False
        local = self._local
        local.put(STATE_KEY, dump_state(self.planner.state))
        # the admission executor: the attempt identity is assigned here, not at Claim
        admissions = [prepare_admission(claim, self._new_id(), now) for claim in plan.claims]
        for admission in admissions:
            self.book.admit(admission)
            claim = admission.claim
            local.put(keys.claim_key(claim.delay_message_id), encode_claim(claim))
        local.write()
        self._outbox.add_admissions(admissions)
        self._outbox.add(plan.expiries)
        return True

    def quiet_for_s(self, longest_s: float) -> float:
        """How long no round can claim anything unless something else happens first (a
        record applied, an outcome, an operator request, all of which wake the loop): until
        the next timeline entry is due by Trusted UTC, ``longest_s`` at most. 0 when the
        last round claimed, or found due work it could not take (a closed gate, a lane not
        ready, capacity, quota, the clock): that waits on time or on other threads."""
        quiet_until = self._quiet_until_ms
        if quiet_until is None:
            return longest_s
        if quiet_until == 0:
            return 0.0
        return min(max(quiet_until - self._clock.now().earliest_ms, 0) / 1000, longest_s)

    def lanes(self) -> dict[str, Lane]:
        """Replicated lane state for every lane this engine can publish to."""
        found = {}
        for _, raw in self._store.scan_prefix(keys.LANE):
            lane = decode_value(raw, Lane)
            found[lane.name] = lane
        return {name: found.get(name, Lane(name=name)) for name in self._publishers}

    def explain_inputs(self, message: Message, *, shard_hold: str | None,
                       gate_detail: str) -> ExplainInputs:
        """What the scheduler's gates read for ``message`` now (``message explain``)."""
        lanes = self.lanes()
        name = message.lane
        lane = lanes.get(name, Lane(name=name))
        publisher = self._publishers.get(name)
        problem = self._clock.problem()
        now = None if problem is not None else self._clock.now()
        claims = self.book.by_message
        own = claims.get(message.delay_message_id)
        size = len(message.payload)
        return ExplainInputs(
            shard_hold=shard_hold, lane=lane, gate_detail=gate_detail,
            ready=publisher is not None and publisher.ready,
            not_ready_reason=("this engine has no publisher for the lane"
                              if publisher is None else publisher.not_ready_reason),
            now=now, clock_problem=problem, clock_held_back=self._clock.held_back(),
            lead_ms=self.planner.leads.get(name, 0),
            ordered_blocker=ordered_blocker(self._store, lane, message, claims,
                                            self._obligation_keys),
            claims_on_lane=sum(1 for claim in claims.values() if claim.lane == name),
            quota_left=None if now is None else quota_left(lane, now, claims.values(),
                                                           self.book.dispatched_claims),
            permits_refusal=self.planner.permits.refusal(name, size),
            claimed=None if own is None else (self.book.attempt_of(own) or own.claim_id),
            capability=record_refusal(message, self.planner.record_limits.get(name)),
            waiting=self.waiting)

    def held_keys(self) -> set[tuple[str, str]]:
        """(lane, key) pairs whose ordered head is taken: an open obligation or a claim."""
        return set(self._obligation_keys.values()) | self.book.held_keys()

    def expire_claims(self) -> None:
        """Release claims whose deadline passed before their admission was acted on, and
        write the turn's local rows.

        An admission still waiting in the outbox is dropped with its claim. One that was
        applied and won, but whose event was never acted on (a crash in between), is an
        attempt only this owner could have sent and never did: it is declined.
        """
        if self.book:
            self._expire(self.book.expired(self._time.monotonic_ms()))
        self._local.write()

    def _expire(self, expired: list[Claim]) -> None:
        if not expired:
            return
        attempts = {claim.claim_id: self.book.attempt_of(claim) for claim in expired}
        self._outbox.drop_admissions({a for a in attempts.values() if a is not None})
        for claim in expired:
            self.book.release(claim, Revocation.DEADLINE)
            attempt_id = attempts[claim.claim_id]
            raw = None if attempt_id is None else self._store.get(keys.attempt_key(attempt_id))
            if raw is not None and decode_value(raw, Attempt).state == AttemptState.PUBLISHING:
                assert attempt_id is not None
                self._outbox.decline(attempt_id,
                                     "owner declined before any send: the claim deadline passed")

    def take_outcomes(self) -> bool:
        """Publisher answers (and declines) as PUBLISH_OUTCOME records, into the outbox;
        False if there were none. They reach the log with the turn's admissions, in one
        append (one synced write per turn, not two: ``bench/scale.py``'s herd)."""
        ownership = self._ownership
        took = False
        for result in self._outbox.answers():
            took = True
            claim = self.book.for_attempt(result.attempt_id)
            if claim is not None:
                delay_message_id = claim.delay_message_id
            else:
                raw = self._store.get(keys.attempt_key(result.attempt_id))
                delay_message_id = decode_value(raw, Attempt).delay_message_id if raw else ""
            self._outbox.add_outcome(encode(PublishOutcome(
                outcome_id=self._new_id(), attempt_id=result.attempt_id,
                delay_message_id=delay_message_id, owner_id=ownership.owner_id,
                fencing_epoch=ownership.epoch, outcome=result.outcome,
                disposition=result.disposition, evidence=result.evidence,
            )))
            # a message's story in the log (`engine logs --message ID`): a publish at
            # debug ([engine] log_level), anything else at info
            safe_event(self._events, "message_outcome",
                       level="debug" if result.outcome == Outcome.PUBLISHED else "info",
                       shard=self._shard_text, delay_message_id=delay_message_id,
                       attempt_id=result.attempt_id, outcome=str(result.outcome),
                       disposition=str(result.disposition), evidence=result.evidence)
        return took

    def let_go(self) -> None:
        """Fenced: no admission of ours goes into the log, and every claim not yet with a
        publisher is released (attempts already with one are refused at its gate)."""
        self._outbox.drop_every_admission()
        self.book.release_undispatched(Revocation.FENCED)

    # acting on applied records --------------------------------------------------------
    def open_obligation(self, obligation: Obligation) -> None:
        """An obligation found open at recovery: its key holds the ordered head."""
        self._hold_head(obligation.attempt_id, obligation)

    def on_applied(self, applied: Applied) -> None:
        """Act on what one applied and synced record did (runs for every record: lean)."""
        for event in applied.events:  # exact types: isinstance on a Struct class costs more
            if type(event) is WorkScheduled:
                self.planner.note_timeline_put(event.timeline_key)
            elif type(event) is ObligationOpened:
                self._hold_head(event.attempt_id, event.obligation)
            elif type(event) is ObligationClosed:
                self._obligation_keys.pop(event.attempt_id, None)
            elif type(event) is Admitted:
                self._on_admission(event.admission, applied)
            elif type(event) is ClaimRevoked:
                self._on_revoked(event)
            elif type(event) is AttemptSettled:
                self._on_settled(event.attempt_id)
            else:  # an activation barrier, an operator's pause...: ask the owner gate again
                self._gate_memo = None

    def _on_settled(self, attempt_id: str) -> None:
        claim = self.book.for_attempt(attempt_id)
        if claim is not None:
            self.book.release(claim)
            self.publish_outcomes += 1

    def _on_revoked(self, revoked: ClaimRevoked) -> None:
        record, result = revoked.admission, revoked.result
        claim = self.book.for_attempt(record.attempt_id)
        if claim is not None:
            self.book.release(claim, Revocation.STALE)
        if result.reason == Reason.TIME_EVIDENCE and record.owner_id == self._ownership.owner_id:
            self._hold_for_time(result.detail or "")

    def _on_admission(self, record: PublishAdmission, applied: Applied) -> None:
        claim = self.book.for_attempt(record.attempt_id)
        mine = record.owner_id == self._ownership.owner_id
        self.admissions += 1
        if record.attempt_id in self.book.dispatched:
            return  # acted on before a crash; never handed over twice
        if claim is not None and (why := self._gate_closed(claim, record, applied)) is None:
            self.book.dispatch(record.attempt_id)
            safe_event(self._events, "message_admitted", level="debug", shard=self._shard_text,
                       lane=record.lane, delay_message_id=record.delay_message_id,
                       attempt_id=record.attempt_id, claim_id=record.claim_id)
            template = claim.template
            self._publishers[claim.lane].submit(
                PublishRequest(record.attempt_id, template, self.evidence_mac(
                    template.delay_message_id, template.generation, record.attempt_id),
                    shard=self._shard_text, sequence=applied.result.position),
                self._outbox.reply, self._ownership.live_owner_gate)
        elif mine:
            if claim is not None:
                self.book.revoked(claim, Revocation.HANDOVER)
            reason = why if claim is not None else "the claim ended before admission"
            safe_event(self._events, "message_declined", shard=str(self._shard),
                       lane=record.lane, delay_message_id=record.delay_message_id,
                       attempt_id=record.attempt_id, reason=reason)
            self._outbox.decline(record.attempt_id, f"owner declined before any send: {reason}")

    def evidence_mac(self, delay_message_id: str, generation: int, attempt_id: str) -> str:
        """The MAC this attempt's destination record carries (the route's current key)."""
        return evidence_mac(self._evidence_keys.keys.current, delay_message_id, generation,
                            attempt_id)

    def expected_mac(self, delay_message_id: str, generation: int,
                     attempt_id: str) -> ExpectedMac:
        """The MAC(s) evidence of this attempt must show: the current key's, and during a
        rotation's grace the previous key's too."""
        return self._evidence_keys.keys.expected(self._time.wall_ms(), delay_message_id,
                                            generation, attempt_id)

    def _gate_closed(self, claim: Claim, record: PublishAdmission,
                     applied: Applied) -> str | None:
        """Why a won admission may not go to its publisher now, or None."""
        state = self._progress.state
        if state != ShardState.ACTIVE:
            return f"the shard is {state}"
        if claim.fencing_epoch != self._ownership.epoch:
            return "the fencing epoch changed"
        mono = self._time.monotonic_ms()
        memo = self._gate_memo
        if memo is None or memo[0] != mono:
            # read once per millisecond, not once per admission (a batch's admissions are
            # acted on together): the owner gate reads RocksDB, and Trusted UTC earliest
            # only grows, so work due at a reading is due at every later one. A rival's
            # barrier fences this owner as it is acted on (the state check above), and the
            # publisher asks the owner gate again just before its destination call.
            memo = self._gate_memo = (mono, self._ownership.live_owner_gate(),
                                      self._clock.now())
        _, why, now = memo
        if why is not None:
            return why
        if not self.book.is_current(claim):
            return "the claim was revoked"
        if mono > claim.deadline_mono_ms:
            return "the claim deadline passed"
        raw = self._store.get(keys.msg_key(record.delay_message_id))
        refused = handover_refusal(
            claim, record, owner_id=self._ownership.owner_id,
            store_id=self._ownership.store_id, epoch=self._ownership.epoch,
            issued_sequence=self.planner.state.claim_sequence,
            message=None if raw is None else decode_value(raw, Message),
            admitted_position=applied.result.position)
        if refused is not None:
            return refused
        if not now.is_due(claim.template.action_at_ms):
            return "the time gate no longer holds"
        publisher = self._publishers.get(claim.lane)
        if publisher is None or not publisher.ready:
            return f"lane {claim.lane} is NOT READY"
        return None

    def _wait(self, why: str) -> None:
        if why != self.waiting:
            safe_event(self._events, "shard_waiting", level="warning", shard=str(self._shard),
                       reason=why)
        self.waiting = why

    def _hold_for_time(self, detail: str) -> None:
        """An admission of ours was refused because our decision led the broker's clock by
        more than the shard allows: our clock is ahead. Claim nothing for a while (no flood
        of refused admissions) and say why."""
        self._time_hold_until_mono_ms = self._time.monotonic_ms() + TIME_HOLD_MS
        self._wait(f"this engine's clock leads the Shard Log's broker clock: {detail}")

    def _forget_claim(self, delay_message_id: str) -> None:
        """A released claim's local row goes, with the turn's other local rows (unsynced:
        claims are local state; a claim made again before then overwrites the delete)."""
        self._local.put(keys.claim_key(delay_message_id), None)

    def _hold_head(self, attempt_id: str, obligation: Obligation) -> None:
        if obligation.key is not None:
            self._obligation_keys[attempt_id] = (obligation.lane, obligation.key)

