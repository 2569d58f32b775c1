"""The shard's own dedup window (SHARD_RETENTION, ``nereus.machine.retention``): results of
records without a lane window and ``reject`` results go after it, by SWEEPs like any other
retained item; shards that never applied one keep them, as before."""

from __future__ import annotations

from pathlib import Path

import msgspec

from nereus import records as r
from nereus.config import parse_config
from nereus.engine.shard.lane_policy import LanePolicies, policy_records
from nereus.machine import Reason
from nereus.records import ResultStatus
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import (
    Identity,
    Result,
    ShardRetentionValue,
    StageCatchUp,
    decode_value,
    encode_value,
)
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, activate, cancel, op, schedule
from tests.unit.logs import due_sweep

S = 1_000  # one second, in ms
IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


def windowed(window_ms: int = 5 * S) -> MemoryShard:
    """A shard with its own dedup window ``window_ms`` (applied at broker time 0) and an
    owner; lane ``local`` has no limits at all."""
    shard = MemoryShard()
    assert shard.result(r.ShardRetention(dedup_window_ms=window_ms, **op("shard")),
                        broker_ms=0).status == ResultStatus.APPLIED
    activate(shard)
    return shard


def sweep(shard: MemoryShard, now_ms: int, mid: str) -> Result:
    return shard.result(due_sweep(shard, now_ms, mid), broker_ms=now_ms)


def retained(shard: MemoryShard, kind: bytes) -> list[str]:
    return sorted(keys.split_retain_key(key)[2] for key in shard.data
                  if key[:1] == keys.RETAIN and key[9:10] == kind)


LANELESS: list[r.Record] = [
    r.QueryBarrier(command_id="q1"),
    r.PayloadReserve(command_id="pr", payload_id="p1", size_bytes=10, sha256="a" * 64,
                     expires_at_ms=10**12),
    r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close")),
    r.CheckpointMark(mutation_id="ck", checkpoint_id="c1", owner_id="owner-a", fencing_epoch=1),
    cancel("ghost"),  # names no message: no lane
]


def test_without_a_shard_window_laneless_results_and_rejects_are_kept() -> None:
    """No SHARD_RETENTION: a query barrier, a payload stage, an operator mutation, a mark, a
    cancel of no message and a garbage record write no retain entry, and a SWEEP far in the
    future removes none of their results (as before: old logs keep their digests)."""
    shard = MemoryShard()
    activate(shard)
    for record in LANELESS:
        shard.apply(record, broker_ms=S)
    bad = shard.apply(b"garbage", broker_ms=S)
    assert [key for key in shard.data if key[:1] == keys.RETAIN] == []
    assert shard.get(keys.META_SHARD_RETENTION) is None
    sweep(shard, 10**12, "sw")
    assert shard.get(keys.result_key("c/q1")) is not None
    assert shard.get(keys.reject_key(bad.result.position)) is not None


def test_laneless_results_and_rejects_go_after_the_shard_window() -> None:
    """Window 5 s: each laneless result and the reject of a garbage record applied at 1 s
    gets an entry at 6 s; a SWEEP at 5.999 s removes nothing, one at 6 s removes them all
    (the payload stage's own entry is at its reservation's expiry + the window)."""
    shard = windowed()
    for record in LANELESS:
        shard.apply(record, broker_ms=S)
    bad = shard.apply(b"garbage", broker_ms=S)
    assert bad.result.status == ResultStatus.REJECTED
    assert retained(shard, keys.RETAIN_REJECT) == [str(bad.result.position)]
    results = retained(shard, keys.RETAIN_RESULT)
    assert {"c/q1", "c/pr", "m/close", "s/ck", "c/c-ghost"} <= set(results)
    assert [key for key in results if key.startswith("b/")]  # the activation's barrier too
    sweep(shard, 6 * S - 1, "sw1")  # takes only what was applied at 0 (the window, barrier)
    assert shard.get(keys.result_key("m/shard")) is None
    assert shard.get(keys.result_key("c/q1")) is not None
    assert shard.get(keys.reject_key(bad.result.position)) is not None
    sweep(shard, 6 * S, "sw2")
    for key in ("c/q1", "c/pr", "m/close", "s/ck", "c/c-ghost"):
        assert shard.get(keys.result_key(key)) is None, key
    assert shard.get(keys.reject_key(bad.result.position)) is None
    assert retained(shard, keys.RETAIN_REJECT) == []
    assert shard.get(keys.payload_key("p1")) is not None  # the stage itself is not a result


def _reserve(shard: MemoryShard, payload_id: str, expires_at_ms: int, *,
             commit: bool) -> None:
    sha = "b" * 64
    shard.apply(r.PayloadReserve(command_id=f"r-{payload_id}", payload_id=payload_id,
                                 size_bytes=10, sha256=sha, expires_at_ms=expires_at_ms),
                broker_ms=S)
    if commit:
        shard.apply(r.PayloadCommit(command_id=f"c-{payload_id}", payload_id=payload_id,
                                    size_bytes=10, sha256=sha,
                                    object_key=f"payloads/{payload_id}"), broker_ms=2 * S)


def test_a_payload_stage_no_message_used_goes_a_window_after_its_reservation_expired() -> None:
    """Window 5 s, reservations expiring at 10 s: one never committed, one committed and
    never used, one a SCHEDULE used. A SWEEP at 15 s removes the first two stages and keeps
    the used one (its message's own sweep takes it); before 15 s it removes none."""
    shard = windowed()
    _reserve(shard, "abandoned", 10 * S, commit=False)
    _reserve(shard, "unused", 10 * S, commit=True)
    _reserve(shard, "used", 10 * S, commit=True)
    assert shard.result(schedule("m1", 100 * S, payload_ref="used"),
                        broker_ms=3 * S).status == ResultStatus.APPLIED
    assert retained(shard, keys.RETAIN_PAYLOAD) == ["abandoned", "unused", "used"]

    early = sweep(shard, 15 * S - 1, "sw1")
    assert all(shard.get(keys.payload_key(p)) is not None
               for p in ("abandoned", "unused", "used")), early.detail
    done = sweep(shard, 15 * S, "sw2")
    assert done.detail is not None and "2 unused payload stages" in done.detail, done.detail
    assert shard.get(keys.payload_key("abandoned")) is None
    assert shard.get(keys.payload_key("unused")) is None
    assert shard.get(keys.payload_key("used")) is not None
    assert retained(shard, keys.RETAIN_PAYLOAD) == []
    late = shard.result(schedule("m2", 100 * S, payload_ref="unused"), broker_ms=16 * S)
    assert late.reason == Reason.UNKNOWN_PAYLOAD


def test_a_reservation_expiry_at_either_end_of_an_integer_is_held_in_the_retain_key() -> None:
    """A client's expires_at_ms is any integer: one beyond u64 less the window and a negative
    one are applied (no crash) and their entries fall at the u64 end and at the window."""
    shard = windowed()
    _reserve(shard, "far", 2**64 - 1, commit=False)
    _reserve(shard, "past", -(10**6), commit=False)
    found = {keys.split_retain_key(key)[2]: keys.split_retain_key(key)[0]
             for key in shard.data if key[:1] == keys.RETAIN and key[9:10] == keys.RETAIN_PAYLOAD}
    assert found == {"far": 2**64 - 1, "past": 5 * S}


def test_a_retry_inside_the_window_is_a_duplicate_and_after_it_a_new_command() -> None:
    """The same QUERY_BARRIER and LANE_GATE again inside the window answer their first
    results with no change; after the window has been swept they are new commands: the
    barrier applies again at its new position, the gate close says it was already closed."""
    shard = windowed()
    first_barrier = shard.result(r.QueryBarrier(command_id="q1"), broker_ms=S)
    first_gate = shard.result(r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close")),
                              broker_ms=S)
    again = shard.apply(r.QueryBarrier(command_id="q1"), broker_ms=2 * S)
    assert again.duplicate and again.result == first_barrier
    assert shard.apply(r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close")),
                       broker_ms=2 * S).result == first_gate
    sweep(shard, 7 * S, "sw")
    later = shard.apply(r.QueryBarrier(command_id="q1"), broker_ms=8 * S)
    assert not later.duplicate and later.result.position > first_barrier.position
    gate = shard.result(r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close")),
                        broker_ms=8 * S)
    assert gate.status == ResultStatus.APPLIED and "already" in (gate.detail or "")


def test_a_lane_window_wins_over_the_shard_window() -> None:
    """Lane ``local`` has dedup_window 0 (keep): its CANCEL's result is kept whatever the
    shard's window; lane ``slow`` has limits from before retention (no window): the shard's
    window covers its results."""
    shard = windowed()
    shard.apply(r.LaneLimits(lane="local", dedup_window_ms=0, retention_ms=0, **op("l")))
    shard.apply(r.LaneLimits(lane="slow", max_pending=5, **op("s")))
    shard.apply(schedule("m1", 100 * S), broker_ms=S)
    shard.apply(schedule("m2", 100 * S, lane="slow"), broker_ms=S)
    shard.apply(cancel("m1"), broker_ms=S)
    shard.apply(cancel("m2"), broker_ms=S)
    sweep(shard, 50 * S, "sw")
    assert shard.get(keys.result_key("c/c-m1")) is not None
    assert shard.get(keys.result_key("c/c-m2")) is None


def test_shard_retention_is_checked_and_idempotent_in_effect() -> None:
    """A negative window is REJECTED; the same window again changes nothing; a new one is
    kept with its position; a SWEEP naming a reject entry without a position is REJECTED."""
    shard = windowed()
    bad = shard.result(r.ShardRetention(dedup_window_ms=-1, **op("neg")))
    assert (bad.status, bad.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
    same = shard.result(r.ShardRetention(dedup_window_ms=5 * S, **op("same")))
    assert "already" in (same.detail or "")
    changed = shard.result(r.ShardRetention(dedup_window_ms=0, **op("keep")))
    raw = shard.get(keys.META_SHARD_RETENTION)
    assert raw is not None
    assert decode_value(raw, ShardRetentionValue) == ShardRetentionValue(
        dedup_window_ms=0, position=changed.position)
    forged = shard.result(r.Sweep(mutation_id="f", owner_id="owner-a", fencing_epoch=1,
                                  entries=(keys.retain_key(0, keys.RETAIN_REJECT, "x1"),)),
                          broker_ms=S)
    assert (forged.status, forged.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)


def test_the_owner_replicates_the_routes_dedup_window(tmp_path: Path) -> None:
    """``[routes.default] dedup_window = "3s"``: a shard without it gets one SHARD_RETENTION
    of 3,000 ms; once held, none; without a route (offline tools), none."""
    config = parse_config('[routes.default]\nlog = "file"\ndedup_window = "3s"\n')
    policies = LanePolicies.of(config, route="default")
    with ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True) as store:
        found = [record for _, _, record in policy_records(store, policies, owner_id="o",
                                                            epoch=1)]
        assert [(type(x), getattr(x, "dedup_window_ms", None)) for x in found] == [
            (r.ShardRetention, 3_000)]
        store.write({keys.META_SHARD_RETENTION: encode_value(
            ShardRetentionValue(dedup_window_ms=3_000, position=1))})
        assert policy_records(store, policies, owner_id="o", epoch=1) == []
        assert policy_records(store, LanePolicies.of(config), owner_id="o", epoch=1) == []
    assert parse_config('[routes.default]\nlog = "file"\n').routes["default"].dedup_window_ms \
        == 7 * 86_400_000


def _window(shard: MemoryShard, window_ms: int, at_ms: int, *,
            catch_up: bool | None = True) -> Result:
    """A SHARD_RETENTION of ``window_ms`` at ``at_ms`` (``catch_up``: its field, None: unset)."""
    return shard.result(r.ShardRetention(
        dedup_window_ms=window_ms, catch_up=msgspec.UNSET if catch_up is None else catch_up,
        **op(f"window-{window_ms}-{at_ms}")), broker_ms=at_ms)


def _backfill(shard: MemoryShard, at_ms: int, *payload_ids: str, mid: str = "bf") -> Result:
    return shard.result(r.RetainBackfill(mutation_id=mid, owner_id=OWNER, fencing_epoch=1,
                                         delay_message_ids=(), payload_ids=payload_ids),
                        broker_ms=at_ms)


def kept_stages(*, catch_up: bool | None = True) -> MemoryShard:
    """No shard window (a shard from before windows): stages reserved at 1 s expiring at
    10 s — ``abandoned``, ``unused`` (committed), ``used`` (a SCHEDULE used it) — then a
    window of 5 s given at 20 s, its SHARD_RETENTION's ``catch_up`` = ``catch_up``."""
    shard = MemoryShard()
    activate(shard)
    _reserve(shard, "abandoned", 10 * S, commit=False)
    _reserve(shard, "unused", 10 * S, commit=True)
    _reserve(shard, "used", 10 * S, commit=True)
    shard.apply(schedule("m1", 100 * S, payload_ref="used"), broker_ms=3 * S)
    assert retained(shard, keys.RETAIN_PAYLOAD) == []
    assert _window(shard, 5 * S, 20 * S, catch_up=catch_up).status == ResultStatus.APPLIED
    return shard


def test_stages_from_before_a_window_are_caught_up_once_one_is_given() -> None:
    """Stages a shard kept with no window: the SHARD_RETENTION that gives one (asking to
    catch up) records where; a backfill at 12 s gives the two unused ones their entry at
    10 s + 5 s and skips the used one and an unknown id; naming them again adds nothing; a
    SWEEP at 15 s removes both. A backfill after 15 s removes such a stage at once."""
    shard = kept_stages()
    held = shard.get(keys.META_SHARD_RETENTION)
    assert held is not None
    value = decode_value(held, ShardRetentionValue)
    assert isinstance(value.stage_catch_up, StageCatchUp)
    assert value.stage_catch_up.window_ms == 5 * S
    done = _backfill(shard, 12 * S, "abandoned", "unused", "used", "ghost")
    assert "2 payload stages caught up (2 retained, 0 removed), 2 not eligible" in \
        (done.detail or ""), done.detail
    assert retained(shard, keys.RETAIN_PAYLOAD) == ["abandoned", "unused"]
    assert {keys.split_retain_key(k)[0] for k in shard.data
            if k[:1] == keys.RETAIN and k[9:10] == keys.RETAIN_PAYLOAD} == {15 * S}
    again = _backfill(shard, 13 * S, "abandoned", "unused", mid="bf2")
    assert "0 payload stages caught up" in (again.detail or "")
    swept = sweep(shard, 15 * S, "sw")
    assert "2 unused payload stages" in (swept.detail or ""), swept.detail
    assert [p for p in ("abandoned", "unused", "used")
            if shard.get(keys.payload_key(p)) is not None] == ["used"]
    late = kept_stages()
    removed = _backfill(late, 16 * S, "abandoned", "unused")
    assert "2 payload stages caught up (0 retained, 2 removed)" in (removed.detail or "")
    assert late.get(keys.payload_key("unused")) is None


def test_a_window_given_back_after_0_catches_up_the_stages_reserved_meanwhile() -> None:
    """Window 5 s, then 0 (kept) at 2 s: ``kept`` reserved at 3 s has no entry; the window
    given back at 20 s catches it up (entry at 10 s + 5 s); ``before`` reserved under the
    first window has its own entry at that same time and is not named twice."""
    shard = MemoryShard()
    activate(shard)
    _window(shard, 5 * S, 0)
    shard.apply(r.PayloadReserve(command_id="r-before", payload_id="before", size_bytes=10,
                                 sha256="b" * 64, expires_at_ms=10 * S), broker_ms=S)
    _window(shard, 0, 2 * S)
    shard.apply(r.PayloadReserve(command_id="r-kept", payload_id="kept", size_bytes=10,
                                 sha256="b" * 64, expires_at_ms=10 * S), broker_ms=3 * S)
    assert retained(shard, keys.RETAIN_PAYLOAD) == ["before"]
    _window(shard, 5 * S, 20 * S)
    done = _backfill(shard, 12 * S, "before", "kept")
    assert "1 payload stages caught up (1 retained, 0 removed), 1 not eligible" in \
        (done.detail or ""), done.detail
    assert retained(shard, keys.RETAIN_PAYLOAD) == ["before", "kept"]


def test_a_window_given_without_asking_leaves_the_old_stages_and_old_bytes() -> None:
    """The same history from a SHARD_RETENTION without ``catch_up`` (an older engine's):
    no stage catch-up, the value has no new field, and a backfill finds nothing eligible;
    a backfill naming no stage reads exactly as before."""
    shard = kept_stages(catch_up=None)
    held = shard.get(keys.META_SHARD_RETENTION)
    assert held is not None and b"stage_catch_up" not in held
    assert "0 payload stages caught up" in (_backfill(shard, 12 * S, "unused").detail or "")
    plain = shard.result(r.RetainBackfill(mutation_id="plain", owner_id=OWNER, fencing_epoch=1,
                                          delay_message_ids=("m1",)), broker_ms=12 * S)
    assert plain.detail == "caught up 0 messages (0 retained, 0 removed); 1 not eligible"


def test_a_stage_reserved_before_the_window_and_committed_after_it_gets_its_entry() -> None:
    """Reserved at 1 s (expiring at 100 s) with no shard window, the window of 5 s given at
    20 s, committed at 30 s: the commit moved the stage out of the catch-up's range, so it
    gives the stage its entry at 105 s itself; a SWEEP then removes it (never used). The
    same commit on a shard whose window came without a catch-up writes no entry."""
    def reserved_then_window(catch_up: bool | None) -> MemoryShard:
        shard = MemoryShard()
        activate(shard)
        shard.apply(r.PayloadReserve(command_id="r-late", payload_id="late", size_bytes=10,
                                     sha256="b" * 64, expires_at_ms=100 * S), broker_ms=S)
        _window(shard, 5 * S, 20 * S, catch_up=catch_up)
        committed = shard.result(r.PayloadCommit(
            command_id="c-late", payload_id="late", size_bytes=10, sha256="b" * 64,
            object_key="payloads/default/0/late"), broker_ms=30 * S)
        assert committed.status == ResultStatus.APPLIED, committed.detail
        return shard

    shard = reserved_then_window(True)
    assert [keys.split_retain_key(k)[0] for k in shard.data if k[:1] == keys.RETAIN
            and k[9:10] == keys.RETAIN_PAYLOAD] == [105 * S]
    assert "1 unused payload stages" in (sweep(shard, 105 * S, "sw").detail or "")
    assert shard.get(keys.payload_key("late")) is None
    assert retained(reserved_then_window(None), keys.RETAIN_PAYLOAD) == []


def test_a_window_or_retention_too_long_for_a_retain_key_never_stops_apply() -> None:
    """A SHARD_RETENTION and a LANE_LIMITS whose windows and retention are the largest
    MessagePack integer (hostile, or a typo in a hand-written record): every record after
    them still applies, and each entry's time is held at the u64's end (an overflow there
    stopped apply, and so the shard, on every replay)."""
    huge = 2**64 - 1
    shard = MemoryShard()
    activate(shard)
    assert _window(shard, huge, 10**12).status == ResultStatus.APPLIED
    limits = shard.result(r.LaneLimits(lane="local", retention_ms=huge, dedup_window_ms=huge,
                                       catch_up=True, catch_up_kept=True, **op("huge")),
                          broker_ms=10**12)
    assert limits.status == ResultStatus.APPLIED, limits.detail
    for record in (r.QueryBarrier(command_id="q"), schedule("m1", 10**12 + S),
                   cancel("m1"), b"garbage"):
        assert shard.apply(record, broker_ms=10**12).result.status in (
            ResultStatus.APPLIED, ResultStatus.REJECTED)
    times = {keys.split_retain_key(key)[0] for key in shard.data if key[:1] == keys.RETAIN}
    assert times == {keys.MAX_EXPIRE_AT_MS}, times
    assert shard.get(keys.result_key("c/q")) is not None
