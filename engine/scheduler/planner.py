"""One scheduling round of one shard: discover due work, check every gate, claim it.

The gates of seed 000 §1, in order: the shard is active (checked by the caller); the
lane's admissionGate is OPEN; the lane is READY; Trusted UTC proves actionAt has arrived
(the scan bound is ``earliest``) and expireAt is open (``latest <= expireAt``; proven expiry
becomes a CLAIM_RESULT EXPIRED through the log); then ordered head, capacity, quota and
permits (``gates``). Discovery is a range scan of the persistent timeline bounded per lane
by its DRR budget; nothing pending is held in memory. A claim revalidates the exact work
(``revalidate``), takes the next checked claimSequence, materialises a large payload
(``payloads``: a bad object is PERMANENT_ERROR, an unanswering store leaves it due) and
prepares the template; it assigns no attempt identity (``admission``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from nereus.engine.scheduler import gates
from nereus.engine.scheduler.claim_limits import publish_template, quota_left, size_refusal
from nereus.engine.scheduler.claims import Claim
from nereus.engine.scheduler.drr import DrrState, LaneRotation
from nereus.engine.scheduler.ordered_blocker import key_head
from nereus.engine.scheduler.payloads import (
    FetchPayload,
    Unfetched,
    committed_stage,
    fetch_attested,
)
from nereus.engine.scheduler.permits import Permits
from nereus.engine.scheduler.revalidate import claim_refusal
from nereus.engine.scheduler.round_plan import Owner, PlannerSettings, RoundPlan
from nereus.publish import PublishTemplate, template_digest
from nereus.records import (
    ClaimDisposition,
    ClaimResult,
    MessageState,
    encode,
)
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, Message, PayloadStage, WorkRef, decode_value
from nereus.trusted_time import TrustedTime

MAX_CLAIM_SEQUENCE = (1 << 64) - 1  # a u64, like every position


@dataclass(frozen=True, slots=True)
class _Round:
    """What one round decides with: its plan so far, the time, the owner, and the claims
    and ordered keys held (both grow as the round claims)."""

    plan: RoundPlan
    now: TrustedTime
    mono_ms: int
    owner: Owner
    claimed: dict[str, Claim]
    open_keys: set[tuple[str, str]]
    admitted: Collection[str]  # claim ids of claims whose admission was applied


@dataclass(slots=True)
class _LaneShare:
    """One lane's share of a round: its budget, what it has spent and what it may still
    claim."""

    lane: Lane
    budget: int
    claims: int  # the lane's live claims, this round's included
    quota_left: int | None  # None: no quota
    used: int = 0
    backlogged: bool = False
    last_key: bytes | None = None  # the last timeline key claimed

    def full(self) -> str | None:
        """Why the lane can take no more claims now (capacity, quota), or None."""
        return gates.capacity(self.lane, self.claims) or gates.quota(self.lane, self.quota_left)

    def claimed(self, key: bytes) -> None:
        """A claim was made at timeline ``key``."""
        self.claims += 1
        if self.quota_left is not None:
            self.quota_left -= 1
        self.used += 1
        self.last_key = key


def _reserve(allowance: int | None, lanes: int) -> int:
    """What a round's allowance keeps for each open lane after the first: a quarter of an
    even share, at least one claim."""
    if allowance is None or lanes < 2:
        return 0
    return max(1, allowance // (4 * lanes))


class Planner:
    def __init__(
        self,
        store: ShardStore,
        permits: Permits,
        state: DrrState,
        settings: PlannerSettings,
        new_id: Callable[[], str],
        fetch_payload: FetchPayload | None = None,
        leads: dict[str, int] | None = None,
        record_limits: dict[str, int | None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self._monotonic = monotonic  # times each claim's local preparation (claim latency)
        # each lane's destination record size limit, checked at Claim (None: no limit)
        self.record_limits = record_limits if record_limits is not None else {}
        # each lane's handoff lead as its destination has it: work is claimed only once
        # earliest >= deliverAt - lead, whatever the replicated policy let actionAt be
        self.leads = leads if leads is not None else {}
        self.fetch_payload = fetch_payload
        self._store_down: str | None = None  # set for the rest of a round after a failed fetch
        self.permits = permits
        self.state = state
        self.settings = settings
        self.rotation = LaneRotation(state, quantum=settings.quantum,
                                     max_deficit=settings.max_deficit)
        self.new_id = new_id
        # per lane: a key below which the lane has no timeline entry. Deleted entries
        # leave tombstones a scan must step over until compaction; starting at the floor
        # skips them. Writes of new timeline keys lower it (``note_timeline_put``).
        self.floors: dict[str, bytes] = {}

    def note_timeline_put(self, key: bytes) -> None:
        lane = keys.split_timeline_key(key)[0]
        floor = self.floors.get(lane)
        if floor is not None and key < floor:
            self.floors[lane] = key

    def round(
        self,
        now: TrustedTime,
        mono_ms: int,
        owner: Owner,
        lanes: dict[str, Lane],
        ready: Callable[[str], bool],
        claimed: dict[str, Claim],
        open_keys: set[tuple[str, str]],
        admitted: Collection[str] = (),
        allowance: int | None = None,
    ) -> RoundPlan:
        """One round over every lane. ``admitted``: claim ids of claims whose admission
        was applied (they have spent their quota token already). ``allowance``: how many
        claims (and expiries) the whole round may make (``pace.TurnPace``; None: the lanes'
        budgets alone). Each open lane after the first is kept ``_reserve`` of it, so the
        lane that starts the round (the rotation moves on each round) cannot take it all."""
        plan = RoundPlan()
        rnd = _Round(plan, now, mono_ms, owner, claimed, open_keys, admitted)
        self._store_down = None
        open_lanes = []
        for name in self.rotation.order(sorted(lanes)):
            lane = lanes[name]
            held = gates.admission_gate(lane) or gates.readiness(ready(name))
            if held is not None:
                plan.waiting[name] = held
                continue
            open_lanes.append(lane)
        left = allowance
        reserve = _reserve(allowance, len(open_lanes))
        for index, lane in enumerate(open_lanes):
            budget = self.rotation.budget(lane.name)
            if left is not None:
                budget = min(budget, max(left - reserve * (len(open_lanes) - index - 1), 0))
            used = self._lane_round(rnd, lane, budget)
            if left is not None:
                left -= used
        return plan

    def _lane_round(self, rnd: _Round, lane: Lane, budget: int) -> int:
        """One lane's share of a round: scan its due timeline from the floor (or, for an
        unordered lane, the DRR cursor) and claim within ``budget``; what it used."""
        name, now = lane.name, rnd.now
        share = _LaneShare(lane, budget,
                           sum(1 for c in rnd.claimed.values() if c.lane == name),
                           _quota_left(lane, rnd))
        prefix = keys.timeline_lane_prefix(name)
        bound = prefix + keys.u64(gates.due_bound_ms(now))
        floor = self.floors.get(name, prefix)
        cursor = None if lane.ordered else self.state.cursors.get(name)
        # an ORDERED lane is scanned from its floor every round; which message of a key
        # goes first is its key queue's (``gates.key_queue``), not the scan's order
        start = cursor if cursor is not None and floor <= cursor < bound else floor
        first_seen: bytes | None = None
        for key, raw_ref in self.store.scan(start, bound):
            if first_seen is None:
                first_seen = key
            if share.used >= share.budget:
                share.backlogged = True
                break
            if not self._visit(rnd, share, key, raw_ref):
                break
        if start == floor:
            self.floors[name] = first_seen if first_seen is not None else max(floor, bound)
        if share.backlogged and share.last_key is not None:
            self.state.cursors[name] = share.last_key + b"\x00"
        else:
            self.state.cursors.pop(name, None)
        self.rotation.settle(name, share.budget, share.used, share.backlogged)
        upcoming = next(iter(self.store.scan(bound, keys.prefix_end(prefix))), None)
        if upcoming is not None:
            at_ms = keys.split_timeline_key(upcoming[0])[1]
            plan = rnd.plan
            plan.next_due_ms = at_ms if plan.next_due_ms is None else min(plan.next_due_ms,
                                                                          at_ms)
        return share.used

    def _visit(self, rnd: _Round, share: _LaneShare, key: bytes, raw_ref: bytes) -> bool:
        """Check one due timeline entry against the gates and claim it, expire it or let it
        wait; False when the lane can take nothing more this round (backlogged)."""
        lane, plan, now = share.lane, rnd.plan, rnd.now
        name = lane.name
        delay_message_id = keys.split_timeline_key(key)[2]
        if delay_message_id in rnd.claimed:
            return True
        raw = self.store.get(keys.msg_key(delay_message_id))
        if raw is None:
            return True
        message = decode_value(raw, Message)
        ref = decode_value(raw_ref, WorkRef)
        if message.state != MessageState.SCHEDULED or message.work_digest != ref.work_digest:
            return True
        if gates.expired(now, message) is not None:  # expiring a held message keeps order
            plan.expiries.append(self._claim_result(
                message, ref, now, rnd.owner, ClaimDisposition.EXPIRED,
                f"Trusted UTC earliest {now.earliest_ms} is after expireAt "
                f"{message.expire_at_ms}"))
            share.used += 1
            return True
        held = gates.ordered_head(lane, message, rnd.open_keys)
        if held is None and lane.ordered and message.key is not None:
            held = gates.key_queue(lane, message, key_head(self.store, name, message.key))
        if held is not None:
            plan.waiting.setdefault(name, held)
            return True  # ordered head: an earlier message with this key is unsettled
        if gates.expiry_unproven(now, message) is not None:
            return True  # cannot prove expiry is still open: wait, neither admit nor expire
        early = gates.not_due(now, message, self.leads.get(name, 0), name)
        if early is not None:
            # the replicated lead is longer than the destination's (a lowered lead that
            # was refused while messages relied on it): deliverAt still bounds the send
            plan.waiting[name] = early
            return True
        full = share.full()
        if full is not None:
            plan.waiting[name] = full
            share.backlogged = True
            return False
        return self._take(rnd, share, key, message, ref)

    def _take(self, rnd: _Round, share: _LaneShare, key: bytes, message: Message,
              ref: WorkRef) -> bool:
        """Take permits for a due message, prepare its template and claim it; False when
        the permits ran out (the lane is backlogged)."""
        began = self._monotonic()
        if claim_refusal(self.store, key, message, ref) is not None:
            return True  # not the message's current work: never claimed, apply decides
        name = share.lane.name
        stage: PayloadStage | None = None
        if message.payload_ref is not None:
            stage, problem = committed_stage(self.store, message.payload_ref)
            if problem is not None:
                self._refuse(rnd, share, message, ref, problem)
                return True
            if self._store_down is not None:
                rnd.plan.waiting[name] = self._store_down
                return True  # stays due; the store is tried again next round
        size = len(message.payload) if stage is None else stage.size_bytes
        if not self.permits.try_acquire(name, size):
            rnd.plan.waiting[name] = "out of permits"
            share.backlogged = True
            return False
        template = self._prepare(rnd, share, message, ref, stage)
        if template is None:
            self.permits.release(name, size)
            return True
        claim = self._claim(message, ref, key, rnd.mono_ms, rnd.owner, template,
                            self._monotonic() - began)
        rnd.claimed[message.delay_message_id] = claim
        rnd.plan.claims.append(claim)
        if share.lane.ordered and message.key is not None:
            rnd.open_keys.add((name, message.key))
        share.claimed(key)
        return True

    def _prepare(self, rnd: _Round, share: _LaneShare, message: Message, ref: WorkRef,
                 stage: PayloadStage | None) -> PublishTemplate | None:
        """The claim's immutable template, its large payload materialised and its size at
        the destination checked; None when it cannot be sent now (the store is down) or
        ever (a CLAIM_RESULT PERMANENT_ERROR is planned)."""
        name = share.lane.name
        payload = message.payload
        if stage is not None:
            # a store that does not answer (or no store at all) ends large payloads for the
            # rest of the round, so one outage does not cost one timeout per message
            fetched = fetch_attested(self.fetch_payload, stage)
            if isinstance(fetched, Unfetched):
                if fetched.permanent:
                    self._refuse(rnd, share, message, ref, fetched.why)
                else:
                    self._store_down = rnd.plan.waiting[name] = fetched.why
                return None
            payload = fetched
        template = publish_template(message, payload)
        too_large = size_refusal(template, self.record_limits.get(name))
        if too_large is not None:
            # seed 000 section 2 step 4: the target-size check at Claim is a proven
            # permanent pre-send error, decided before any attempt exists
            self._refuse(rnd, share, message, ref, too_large)
            return None
        return template

    def _refuse(self, rnd: _Round, share: _LaneShare, message: Message, ref: WorkRef,
                detail: str) -> None:
        """A proven permanent pre-send error: CLAIM_RESULT PERMANENT_ERROR, and one unit of
        the lane's budget spent."""
        rnd.plan.expiries.append(self._claim_result(
            message, ref, rnd.now, rnd.owner, ClaimDisposition.PERMANENT_ERROR, detail))
        share.used += 1

    def _claim_result(
        self, message: Message, ref: WorkRef, now: TrustedTime, owner: Owner,
        disposition: ClaimDisposition, detail: str,
    ) -> bytes:
        return encode(ClaimResult(
            mutation_id=self.new_id(), delay_message_id=message.delay_message_id,
            generation=message.generation, work_digest=ref.work_digest,
            owner_id=owner.owner_id, fencing_epoch=owner.fencing_epoch,
            disposition=disposition, detail=detail,
            decided_earliest_ms=now.earliest_ms, decided_latest_ms=now.latest_ms,
        ))

    def _claim(
        self, message: Message, ref: WorkRef, key: bytes, mono_ms: int, owner: Owner,
        template: PublishTemplate, prepare_s: float,
    ) -> Claim:
        """The claim (no attempt identity) with the next checked claimSequence."""
        sequence = self.state.claim_sequence + 1
        if sequence > MAX_CLAIM_SEQUENCE:  # checked: never wraps, never repeats
            raise OverflowError(f"claimSequence {sequence} is past {MAX_CLAIM_SEQUENCE}")
        self.state.claim_sequence = sequence
        return Claim(
            claim_id=self.new_id(), claim_sequence=sequence, owner_id=owner.owner_id,
            store_id=owner.store_id, fencing_epoch=owner.fencing_epoch,
            deadline_mono_ms=mono_ms + self.settings.claim_ttl_ms,
            delay_message_id=message.delay_message_id, lane=message.lane,
            generation=message.generation, work_digest=ref.work_digest, timeline_key=key,
            revision=message.updated_position, template=template,
            template_digest=template_digest(template), size_bytes=len(template.payload),
            prepare_s=prepare_s,
        )


def _quota_left(lane: Lane, rnd: _Round) -> int | None:
    return quota_left(lane, rnd.now, rnd.claimed.values(), rnd.admitted)


