"""One scheduling round of one shard: discover due work, check every gate, claim it.

The gates of seed 000 section 1, in the order they are checked:

1. the shard is ACTIVE_FOR_COMMANDS (activation barrier applied, not paused) - checked by
   the caller before a round;
2. the lane's source-ordered admissionGate is OPEN;
3. the lane's runtime readiness is READY;
4. Trusted UTC proves actionAt has arrived (the scan bound is ``earliest``) and expireAt has
   not closed admission (``latest <= expireAt``; ``earliest > expireAt`` means expired,
   which becomes a CLAIM_RESULT EXPIRED through the log);
5. ordered head (an ORDERED lane's key with an unsettled attempt waits), lane capacity,
   and permits.

Discovery is a range scan of the persistent timeline, bounded per lane by the DRR budget;
nothing keeps an in-memory copy of pending work.

Large payloads are materialised here, at Claim: a message with ``payload_ref`` names a
COMMITTED payload stage (``payload/<id>``) whose ``object_key`` is fetched with
``fetch_payload`` and checked against the attested size and SHA-256 before it goes into the
immutable PublishTemplate (so ``prepared_digest`` covers the real bytes, and the byte permit
counts them). An object that is missing, corrupt or does not match the attestation is a
proven permanent pre-send error: CLAIM_RESULT PERMANENT_ERROR through the log, naming the
key. An object store that does not answer proves nothing: the message is skipped and stays
due, and no further large payload is tried in that round.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from nereus.adapters.objectstore.protocol import ObjectCorrupt, ObjectMissing
from nereus.engine.destinations.protocol import record_size
from nereus.engine.scheduler.claims import Claim
from nereus.engine.scheduler.drr import DrrState, LaneRotation
from nereus.engine.scheduler.permits import Permits
from nereus.errors import ServiceUnreachable
from nereus.machine.tx import quota_tokens_milli
from nereus.publish import PublishTemplate, template_digest
from nereus.records import (
    ClaimDisposition,
    ClaimResult,
    Gate,
    MessageState,
    PublishAdmission,
    encode,
)
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, Message, PayloadStage, WorkRef, decode_value
from nereus.trusted_time import TrustedTime

FetchPayload = Callable[[str], bytes]
"""Given an object key, the object's bytes (the store verifies its recorded SHA-256).

Raises ``ObjectMissing`` / ``ObjectCorrupt`` (proven permanent) or ``ServiceUnreachable``
(proves nothing: try again later)."""


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    quantum: int = 256
    max_deficit: int = 1_024
    claim_ttl_ms: int = 30_000


@dataclass
class RoundPlan:
    claims: list[Claim] = field(default_factory=list)
    # CLAIM_RESULT records: proven expiries and proven permanent pre-send errors
    expiries: list[bytes] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # lane -> why it did not progress


@dataclass(frozen=True, slots=True)
class Owner:
    owner_id: str
    store_id: str
    fencing_epoch: int


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
    ) -> None:
        self.store = store
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
    ) -> RoundPlan:
        """One round over every lane. ``admitted``: attempt ids of claims whose admission
        was applied (they have spent their quota token already)."""
        plan = RoundPlan()
        self._store_down = None
        for name in self.rotation.order(sorted(lanes)):
            lane = lanes[name]
            if lane.gate != Gate.OPEN:
                plan.waiting[name] = "admissionGate CLOSED"
                continue
            if not ready(name):
                plan.waiting[name] = "NOT READY"
                continue
            self._lane_round(plan, lane, now, mono_ms, owner, claimed, open_keys, admitted)
        return plan

    def _lane_round(
        self, plan: RoundPlan, lane: Lane, now: TrustedTime, mono_ms: int, owner: Owner,
        claimed: dict[str, Claim], open_keys: set[tuple[str, str]], admitted: Collection[str],
    ) -> None:
        name = lane.name
        budget = self.rotation.budget(name)
        used = 0
        lane_claims = sum(1 for c in claimed.values() if c.lane == name)
        quota_left: int | None = None
        if lane.quota is not None:  # the replicated bucket, refilled to now, less the
            tokens, _ = quota_tokens_milli(lane, now.earliest_ms)  # claims not yet admitted
            quota_left = tokens // 1_000 - sum(
                1 for c in claimed.values() if c.lane == name and c.attempt_id not in admitted)
        prefix = keys.timeline_lane_prefix(name)
        bound = prefix + keys.u64(now.earliest_ms + 1)
        floor = self.floors.get(name, prefix)
        cursor = None if lane.ordered else self.state.cursors.get(name)
        # an ORDERED lane is scanned from its floor every round, so the first due entry of
        # a key seen is that key's head and no later entry of it can overtake it
        start = cursor if cursor is not None and floor <= cursor < bound else floor
        backlogged = False
        last_key: bytes | None = None
        first_seen: bytes | None = None
        held_keys: set[str] = set()  # ordered keys whose head was seen (or held) this round
        for key, raw_ref in self.store.scan(start, bound):
            if first_seen is None:
                first_seen = key
            if used >= budget:
                backlogged = True
                break
            delay_message_id = keys.split_timeline_key(key)[2]
            if delay_message_id in claimed:
                continue
            raw = self.store.get(keys.msg_key(delay_message_id))
            if raw is None:
                continue
            message = decode_value(raw, Message)
            ref = decode_value(raw_ref, WorkRef)
            if message.state != MessageState.SCHEDULED or message.work_digest != ref.work_digest:
                continue
            if lane.ordered and message.key is not None:
                if (name, message.key) in open_keys or message.key in held_keys:
                    plan.waiting.setdefault(name, f"ordered head: key {message.key!r} has an "
                                                  "earlier unsettled message")
                    held_keys.add(message.key)
                    continue  # ordered head: an earlier message with this key is unsettled
                held_keys.add(message.key)  # this is the key's head: later ones wait
            if now.has_expired(message.expire_at_ms):
                plan.expiries.append(encode(ClaimResult(
                    mutation_id=self.new_id(), delay_message_id=delay_message_id,
                    generation=message.generation, work_digest=ref.work_digest,
                    owner_id=owner.owner_id, fencing_epoch=owner.fencing_epoch,
                    disposition=ClaimDisposition.EXPIRED,
                    detail=f"Trusted UTC earliest {now.earliest_ms} is after expireAt "
                    f"{message.expire_at_ms}",
                    decided_earliest_ms=now.earliest_ms, decided_latest_ms=now.latest_ms,
                )))
                used += 1
                continue
            if not now.expiry_open(message.expire_at_ms):
                continue  # cannot prove expiry is still open: wait, neither admit nor expire
            if now.earliest_ms < message.deliver_at_ms - self.leads.get(name, 0):
                # the replicated lead is longer than the destination's (a lowered lead that
                # was refused while messages relied on it): deliverAt still bounds the send
                plan.waiting[name] = (f"deliverAt not reached: lane {name}'s destination "
                                      f"holds messages for {self.leads.get(name, 0)} ms")
                continue
            if lane.capacity is not None and lane.open_attempts + lane_claims >= lane.capacity:
                plan.waiting[name] = f"at capacity {lane.capacity}"
                backlogged = True
                break
            if quota_left is not None and quota_left <= 0:
                plan.waiting[name] = f"quota: {lane.quota} admissions per second"
                backlogged = True
                break
            stage: PayloadStage | None = None
            if message.payload_ref is not None:
                stage, problem = self._payload_stage(message.payload_ref)
                if problem is not None:
                    plan.expiries.append(self._permanent_error(message, ref, now, owner, problem))
                    used += 1
                    continue
                if self._store_down is not None:
                    plan.waiting[name] = self._store_down
                    continue  # stays due; the store is tried again next round
            size = len(message.payload) if stage is None else stage.size_bytes
            if not self.permits.try_acquire(name, size):
                plan.waiting[name] = "out of permits"
                backlogged = True
                break
            payload = message.payload
            if stage is not None:
                fetched, problem = self._materialise(stage)
                if fetched is None:
                    self.permits.release(name, size)
                    if problem is not None:
                        plan.expiries.append(
                            self._permanent_error(message, ref, now, owner, problem))
                        used += 1
                    else:
                        assert self._store_down is not None
                        plan.waiting[name] = self._store_down
                    continue
                payload = fetched
            template = _template(message, payload)
            limit = self.record_limits.get(name)
            if limit is not None and (weight := record_size(template)) > limit:
                # seed 000 section 2 step 4: the target-size check at Claim is a proven
                # permanent pre-send error, decided before any attempt exists
                self.permits.release(name, size)
                plan.expiries.append(self._permanent_error(
                    message, ref, now, owner,
                    f"the record is {weight} bytes at the destination; lane {name}'s "
                    f"destination takes at most {limit}"))
                used += 1
                continue
            claim = self._claim(message, ref, now, mono_ms, owner, template)
            claimed[delay_message_id] = claim
            plan.claims.append(claim)
            if lane.ordered and message.key is not None:
                open_keys.add((name, message.key))
            lane_claims += 1
            if quota_left is not None:
                quota_left -= 1
            used += 1
            last_key = key
        if start == floor:
            self.floors[name] = first_seen if first_seen is not None else max(floor, bound)
        if backlogged and last_key is not None:
            self.state.cursors[name] = last_key + b"\x00"
        else:
            self.state.cursors.pop(name, None)
        self.rotation.settle(name, budget, used, backlogged)

    def _payload_stage(self, payload_id: str) -> tuple[PayloadStage | None, str | None]:
        """The COMMITTED stage a message references, or why there is none (permanent)."""
        raw = self.store.get(keys.payload_key(payload_id))
        if raw is None:
            return None, f"large payload {payload_id} has no payload stage on this shard"
        stage = decode_value(raw, PayloadStage)
        if stage.state != "COMMITTED" or stage.object_key is None:
            return None, f"large payload {payload_id} is {stage.state}, not COMMITTED"
        return stage, None

    def _materialise(self, stage: PayloadStage) -> tuple[bytes | None, str | None]:
        """(bytes, None) fetched and attested; (None, why) permanent; (None, None) retry later.

        A store that does not answer (or no store at all) marks the rest of the round
        ``_store_down`` so one outage does not cost one timeout per message.
        """
        key = stage.object_key
        assert key is not None
        if self.fetch_payload is None:
            self._store_down = "no object store to fetch large payloads from"
            return None, None
        try:
            data = self.fetch_payload(key)
        except ServiceUnreachable as exc:
            self._store_down = f"object store unreachable: {exc.message}"
            return None, None
        except (ObjectMissing, ObjectCorrupt) as exc:
            what = "missing" if isinstance(exc, ObjectMissing) else "corrupt"
            return None, (f"large payload {stage.payload_id}: object {key} is {what} "
                          f"({exc.message})")
        sha = hashlib.sha256(data).hexdigest()
        if (len(data), sha) != (stage.size_bytes, stage.sha256):
            return None, (
                f"large payload {stage.payload_id}: object {key} holds {len(data)} bytes "
                f"sha256 {sha[:16]}.. but {stage.size_bytes} bytes sha256 "
                f"{stage.sha256[:16]}.. were attested"
            )
        return data, None

    def _permanent_error(
        self, message: Message, ref: WorkRef, now: TrustedTime, owner: Owner, detail: str
    ) -> bytes:
        return encode(ClaimResult(
            mutation_id=self.new_id(), delay_message_id=message.delay_message_id,
            generation=message.generation, work_digest=ref.work_digest,
            owner_id=owner.owner_id, fencing_epoch=owner.fencing_epoch,
            disposition=ClaimDisposition.PERMANENT_ERROR, detail=detail,
            decided_earliest_ms=now.earliest_ms, decided_latest_ms=now.latest_ms,
        ))

    def _claim(
        self, message: Message, ref: WorkRef, now: TrustedTime, mono_ms: int, owner: Owner,
        template: PublishTemplate,
    ) -> Claim:
        self.state.claim_sequence += 1
        claim_id, attempt_id = self.new_id(), self.new_id()
        admission = PublishAdmission(
            attempt_id=attempt_id, delay_message_id=message.delay_message_id,
            generation=message.generation, work_digest=ref.work_digest, lane=message.lane,
            claim_id=claim_id, claim_sequence=self.state.claim_sequence,
            owner_id=owner.owner_id, fencing_epoch=owner.fencing_epoch,
            prepared_digest=template_digest(template),
            decided_earliest_ms=now.earliest_ms, decided_latest_ms=now.latest_ms,
        )
        return Claim(
            claim_id=claim_id, claim_sequence=self.state.claim_sequence, owner_id=owner.owner_id,
            store_id=owner.store_id, fencing_epoch=owner.fencing_epoch,
            deadline_mono_ms=mono_ms + self.settings.claim_ttl_ms,
            delay_message_id=message.delay_message_id, lane=message.lane,
            generation=message.generation, work_digest=ref.work_digest, attempt_id=attempt_id,
            admission=encode(admission), template=template, size_bytes=len(template.payload),
        )


def _template(message: Message, payload: bytes) -> PublishTemplate:
    """The immutable prepared publish template of a claim (seed 000 section 2 step 5)."""
    return PublishTemplate(
        delay_message_id=message.delay_message_id, generation=message.generation,
        lane=message.lane, deliver_at_ms=message.deliver_at_ms,
        action_at_ms=message.action_at_ms, key=message.key, headers=message.headers,
        payload=payload,
    )

