"""The scheduler's planner: gates, two-level DRR fairness, ordered head, capacity, expiry."""

from __future__ import annotations

import itertools

import msgspec

from nereus import records as r
from nereus.engine.scheduler.admission import prepare_admission
from nereus.engine.scheduler.claims import Claim
from nereus.engine.scheduler.drr import DrrState
from nereus.engine.scheduler.permits import PermitLimits, Permits
from nereus.engine.scheduler.planner import Planner
from nereus.engine.scheduler.round_plan import Owner, PlannerSettings
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, WorkRef, decode_value, encode_value
from nereus.testing import MemoryShard
from nereus.trusted_time import TrustedTime
from tests.integration.stores import Build
from tests.unit.builders import op, schedule

OWNER = Owner("owner", "store", 1)
NOW = TrustedTime(10_000, 10_010)


def planner(store: ShardStore, *, quantum: int = 4, permits: PermitLimits | None = None,
            state: DrrState | None = None) -> Planner:
    counter = itertools.count()
    return Planner(store, Permits(permits or PermitLimits()), state or DrrState(),
                   PlannerSettings(quantum=quantum, max_deficit=8), lambda: f"id{next(counter)}")


def lanes_of(store: ShardStore, *names: str) -> dict[str, Lane]:
    out = {}
    for name in names:
        raw = store.get(keys.lane_key(name))
        out[name] = Lane(name=name) if raw is None else decode_value(raw, Lane)
    return out


def test_only_due_work_is_claimed(store_from: Build) -> None:
    """Entries with actionAt <= earliest are claimed; later ones are not touched."""
    shard = MemoryShard()
    shard.apply(schedule("due", 9_000))
    shard.apply(schedule("edge", 10_000))
    shard.apply(schedule("later", 10_001))
    store = store_from(shard)
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {},
                                set())
    assert sorted(c.delay_message_id for c in plan.claims) == ["due", "edge"]
    admission = r.decode(prepare_admission(plan.claims[0], "a1", NOW).data)
    assert isinstance(admission, r.PublishAdmission)
    assert admission.decided_earliest_ms == NOW.earliest_ms


def test_a_hot_early_lane_does_not_starve_another(store_from: Build) -> None:
    """With 50 due in an early lane and 3 in another, one round serves both lanes."""
    shard = MemoryShard()
    for i in range(50):
        shard.apply(schedule(f"hot{i}", 1_000 + i, lane="aaa-hot"))
    for i in range(3):
        shard.apply(schedule(f"cold{i}", 9_000, lane="zzz-cold"))
    store = store_from(shard)
    p = planner(store, quantum=4)
    claimed: dict[str, Claim] = {}
    plan = p.round(NOW, 0, OWNER, lanes_of(store, "aaa-hot", "zzz-cold"), lambda _: True,
                   claimed, set())
    by_lane = [c.lane for c in plan.claims]
    assert by_lane.count("zzz-cold") == 3 and by_lane.count("aaa-hot") == 4
    # the next round resumes the hot lane after its last claim (discovery cursor)
    plan2 = p.round(NOW, 0, OWNER, lanes_of(store, "aaa-hot", "zzz-cold"), lambda _: True,
                    claimed, set())
    assert [c.delay_message_id for c in plan2.claims] == [f"hot{i}" for i in range(4, 8)]
    assert p.state.cursors["aaa-hot"] > keys.timeline_lane_prefix("aaa-hot")


def test_closed_and_not_ready_lanes_are_skipped_without_blocking_others(store_from: Build) -> None:
    """A CLOSED lane and a NOT READY lane claim nothing; the healthy lane still does."""
    shard = MemoryShard()
    for lane in ("closed", "sick", "healthy"):
        shard.apply(schedule(f"{lane}-1", 1_000, lane=lane))
    shard.apply(r.LaneGate(lane="closed", gate=r.Gate.CLOSED, **op("k")))
    store = store_from(shard)
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "closed", "sick", "healthy"),
                                lambda lane: lane != "sick", {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["healthy-1"]
    assert plan.waiting == {"closed": "admissionGate CLOSED", "sick": "NOT READY"}


def test_ordered_lane_holds_a_key_behind_an_unsettled_attempt(store_from: Build) -> None:
    """In an ORDERED lane a key with an open attempt waits; one claim per key per round."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", ordered=True, **op("o")))
    shard.apply(schedule("a1", 1_000, key="A"))
    shard.apply(schedule("a2", 2_000, key="A"))
    shard.apply(schedule("b1", 3_000, key="B"))
    store = store_from(shard)
    open_keys = {("local", "B")}
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {},
                                open_keys)
    assert [c.delay_message_id for c in plan.claims] == ["a1"]


def test_capacity_and_permits_bound_claims(store_from: Build) -> None:
    """Lane capacity and the permit pool both stop claiming at their bound."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", capacity=2, **op("c")))
    for i in range(5):
        shard.apply(schedule(f"m{i}", 1_000))
    store = store_from(shard)
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {},
                                set())
    assert len(plan.claims) == 2 and plan.waiting["local"] == "at capacity 2"
    shard2 = MemoryShard()
    for i in range(5):
        shard2.apply(schedule(f"m{i}", 1_000))
    store2 = store_from(shard2)
    limited = planner(store2, permits=PermitLimits(worker=3))
    plan2 = limited.round(NOW, 0, OWNER, lanes_of(store2, "local"), lambda _: True, {}, set())
    assert len(plan2.claims) == 3 and plan2.waiting["local"] == "out of permits"


def test_expired_messages_become_claim_results_and_unproven_expiry_waits(store_from: Build) -> None:
    """earliest > expireAt: CLAIM_RESULT EXPIRED; latest > expireAt >= earliest: wait."""
    shard = MemoryShard()
    shard.apply(schedule("gone", 1_000, expire_at_ms=9_000))
    shard.apply(schedule("unsure", 1_000, expire_at_ms=10_005))
    shard.apply(schedule("fine", 1_000, expire_at_ms=20_000))
    store = store_from(shard)
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {},
                                set())
    assert [c.delay_message_id for c in plan.claims] == ["fine"]
    (expiry,) = [r.decode(raw) for raw in plan.expiries]
    assert isinstance(expiry, r.ClaimResult) and expiry.delay_message_id == "gone"
    assert expiry.disposition == r.ClaimDisposition.EXPIRED


def test_the_scan_floor_skips_empty_ranges_but_new_early_entries_lower_it(
        store_from: Build) -> None:
    """After a scan the lane's floor sits at its first entry; a new earlier entry lowers it."""
    shard = MemoryShard()
    shard.apply(schedule("late", 50_000))
    store = store_from(shard)
    p = planner(store)
    assert p.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set()).claims == []
    floor = p.floors["local"]
    assert floor > keys.timeline_lane_prefix("local")
    early = keys.timeline_key("local", 5_000, "early")
    shard.apply(schedule("early", 5_000))
    store.write(dict(shard.data))
    plan = p.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set())
    assert plan.claims == [], "without a note the floor hides the new entry"
    p.note_timeline_put(early)
    plan = p.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["early"]


def test_a_replicated_lead_longer_than_the_destinations_waits_for_deliver_at(
        store_from: Build) -> None:
    """The lane's replicated lead (5 s) let actionAt be early, but its destination (lead
    0: a plain publish) holds nothing: the planner waits until deliverAt and says why."""
    shard = MemoryShard()
    shard.apply(r.LaneConfig(lane="local", handoff_lead_ms=5_000, **op("lead")))
    shard.apply(r.Schedule(command_id="s1", delay_message_id="held", lane="local",
                           deliver_at_ms=12_000))
    shard.apply(r.Schedule(command_id="s2", delay_message_id="due", lane="local",
                           deliver_at_ms=10_000))
    store = store_from(shard)
    plain = planner(store)
    plain.leads = {"local": 0}
    plan = plain.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["due"]
    assert "deliverAt not reached" in plan.waiting["local"]
    handoff = planner(store)
    handoff.leads = {"local": 5_000}
    plan = handoff.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set())
    assert sorted(c.delay_message_id for c in plan.claims) == ["due", "held"]


def test_the_target_size_check_runs_at_claim(store_from: Build) -> None:
    """A record larger than its lane's destination takes is a CLAIM_RESULT PERMANENT_ERROR
    naming both sizes, decided at Claim: no claim, no attempt, permits returned."""
    shard = MemoryShard()
    shard.apply(schedule("small", 9_000, payload=b"x" * 100))
    shard.apply(schedule("big", 9_000, payload=b"x" * 5_000))
    store = store_from(shard)
    permits = Permits(PermitLimits())
    limited = Planner(store, permits, DrrState(), PlannerSettings(), lambda: "id",
                      record_limits={"local": 2_000})
    plan = limited.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set())
    assert [c.delay_message_id for c in plan.claims] == ["small"]
    (raw,) = plan.expiries
    result = r.decode(raw)
    assert isinstance(result, r.ClaimResult)
    assert result.delay_message_id == "big"
    assert result.disposition == r.ClaimDisposition.PERMANENT_ERROR
    assert "5512 bytes" in result.detail and "at most 2000" in result.detail
    assert permits.bytes_used == 100


def test_a_round_allowance_bounds_the_round_and_keeps_a_share_for_each_lane(
        store_from: Build) -> None:
    """With an allowance of 32, a round claims 32 at most whichever lane starts it; the
    lane with 3 due gets all 3 (the starting hot lane leaves it a quarter of an even
    share, 4, of which one goes unused), the hot lane the rest; without an allowance the
    lanes' quanta alone bound the round."""
    shard = MemoryShard()
    for i in range(200):
        shard.apply(schedule(f"hot{i}", 1_000 + i, lane="aaa-hot"))
    for i in range(3):
        shard.apply(schedule(f"cold{i}", 9_000, lane="zzz-cold"))
    store = store_from(shard)
    for start, hot in ((0, 28), (1, 29)):
        p = planner(store, quantum=64, state=DrrState(next_lane=start))
        plan = p.round(NOW, 0, OWNER, lanes_of(store, "aaa-hot", "zzz-cold"), lambda _: True,
                       {}, set(), allowance=32)
        by_lane = [c.lane for c in plan.claims]
        assert by_lane.count("zzz-cold") == 3, f"rotation starting at lane {start}"
        assert by_lane.count("aaa-hot") == hot
    unpaced = planner(store, quantum=64).round(NOW, 0, OWNER,
                                               lanes_of(store, "aaa-hot", "zzz-cold"),
                                               lambda _: True, {}, set())
    assert len(unpaced.claims) == 64 + 3


def test_an_allowance_cut_leaves_the_hot_lane_backlogged_with_its_cursor(
        store_from: Build) -> None:
    """A lane cut short by the allowance keeps its discovery cursor: the next round goes on
    after its last claim."""
    shard = MemoryShard()
    for i in range(40):
        shard.apply(schedule(f"m{i:02}", 1_000 + i))
    store = store_from(shard)
    p = planner(store, quantum=64)
    claimed: dict[str, Claim] = {}
    first = p.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, claimed, set(),
                    allowance=10)
    second = p.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, claimed, set(),
                     allowance=10)
    assert [c.delay_message_id for c in first.claims] == [f"m{i:02}" for i in range(10)]
    assert [c.delay_message_id for c in second.claims] == [f"m{i:02}" for i in range(10, 20)]


def _claimed(store: ShardStore) -> list[str]:
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {},
                                set())
    return [c.delay_message_id for c in plan.claims]


def test_a_timeline_entry_that_is_not_the_messages_exact_key_is_never_claimed(
        store_from: Build) -> None:
    """Seed 000 section 2 step 2: a leftover entry of m under another actionAt, carrying
    m's very work digest, is not claimed (the scan meets it first); m's own entry is."""
    shard = MemoryShard()
    shard.apply(schedule("m", 5_000))
    store = store_from(shard)
    key = keys.timeline_key("local", 5_000, "m")
    raw = store.get(key)
    assert raw is not None
    store.write({keys.timeline_key("local", 1_000, "m"): raw, key: None})
    assert _claimed(store) == []
    store.write({key: raw})
    plan = planner(store).round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {},
                                set())
    [claim] = plan.claims
    message = shard.message("m")
    assert message is not None
    assert claim.timeline_key == key and claim.revision == message.updated_position


def test_claim_revalidates_generation_counters_and_open_obligations(store_from: Build) -> None:
    """An entry whose generation or retry count is not the message's, a message whose next
    attempt number is already in the ledger, or one with an open obligation: none is
    claimed; the message beside them is."""
    shard = MemoryShard()
    for mid in ("gen", "retry", "ledger", "obligation", "fine"):
        shard.apply(schedule(mid, 1_000))
    store = store_from(shard)

    def ref_of(mid: str) -> WorkRef:
        raw = store.get(keys.timeline_key("local", 1_000, mid))
        assert raw is not None
        return decode_value(raw, WorkRef)

    gen, retry = ref_of("gen"), ref_of("retry")
    store.write({
        keys.timeline_key("local", 1_000, "gen"): encode_value(WorkRef(
            gen.generation + 1, gen.work_kind, gen.work_digest, gen.retry)),
        keys.timeline_key("local", 1_000, "retry"): encode_value(WorkRef(
            retry.generation, retry.work_kind, retry.work_digest, retry.retry + 1)),
        keys.msg_attempt_key("ledger", 1): b"a-old",
    })
    obligation = shard.message("obligation")
    assert obligation is not None
    store.write({
        keys.msg_key("obligation"): encode_value(msgspec.structs.replace(obligation,
                                                                         attempts=1)),
        keys.msg_attempt_key("obligation", 1): b"a-1",
        keys.obligation_key("obligation", "a-1"): b"open",
    })
    assert _claimed(store) == ["fine"]


def test_a_claim_draws_no_attempt_identity(store_from: Build) -> None:
    """Seed 000 section 2 step 5: a round of three claims draws three ids (the claim ids)
    and no attempt id; the Claim has no attempt field. The admission executor assigns the
    attempt: the prepared PUBLISH_ADMISSION names it with the claim's exact precondition,
    and preparing it again gives the very same bytes (what an enqueue retry resends)."""
    shard = MemoryShard()
    for i in range(3):
        shard.apply(schedule(f"m{i}", 1_000))
    store = store_from(shard)
    drawn: list[str] = []

    def new_id() -> str:
        drawn.append(f"id{len(drawn)}")
        return drawn[-1]

    rounds = Planner(store, Permits(PermitLimits()), DrrState(),
                     PlannerSettings(quantum=4, max_deficit=8), new_id)
    plan = rounds.round(NOW, 0, OWNER, lanes_of(store, "local"), lambda _: True, {}, set())
    assert sorted(c.claim_id for c in plan.claims) == sorted(drawn) and len(drawn) == 3
    assert "attempt_id" not in Claim.__struct_fields__
    claim = plan.claims[0]
    prepared = prepare_admission(claim, "attempt-1", NOW)
    record = r.decode(prepared.data)
    assert isinstance(record, r.PublishAdmission)
    assert (record.attempt_id, record.claim_id, record.claim_sequence, record.work_digest,
            record.prepared_digest) == ("attempt-1", claim.claim_id, claim.claim_sequence,
                                        claim.work_digest, claim.template_digest)
    assert prepare_admission(claim, "attempt-1", NOW).data == prepared.data
    assert [c.claim_sequence for c in plan.claims] == [1, 2, 3]
