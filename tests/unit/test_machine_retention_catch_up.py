"""Retention catch-up (``nereus.machine.retention``, RETAIN_BACKFILL): messages that ended
before their lane first had a retention get their ``retain`` entry from records naming
them, bounded and idempotent, decided from the record and the state alone, so live,
replay and replay from a checkpoint keep equal digests."""

from __future__ import annotations

from collections import Counter

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus import records as r
from nereus.machine import Reason
from nereus.machine.catch_up import catch_up_of
from nereus.records import ResultStatus
from nereus.records.vocabulary import TERMINAL_STATES
from nereus.state import keys
from nereus.state.values import LaneLimit, Result, RetainCatchUp, decode_value
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, activate, admission, barrier, cancel, op, outcome, schedule
from tests.unit.logs import (
    MIDS,
    LogEntries,
    LogWriter,
    due_sweep,
    replayed_in_agreement,
)

S = 1_000  # one second, in ms


def first_retention(shard: MemoryShard, at_ms: int, *, catch_up: bool = True,
                    retention_ms: int = 5 * S, dedup_window_ms: int = 8 * S,
                    kept: bool | None = None) -> Result:
    """A LANE_LIMITS on lane ``local`` at ``at_ms`` (``kept``: its ``catch_up_kept``)."""
    return shard.result(r.LaneLimits(lane="local", retention_ms=retention_ms,
                                     dedup_window_ms=dedup_window_ms, catch_up=catch_up,
                                     catch_up_kept=msgspec.UNSET if kept is None else kept,
                                     **op(f"limits-{at_ms}-{catch_up}")), broker_ms=at_ms)


def backfill(shard: MemoryShard, at_ms: int, *ids: str, mid: str = "bf",
             owner: str = OWNER) -> Result:
    return shard.result(r.RetainBackfill(mutation_id=mid, owner_id=owner, fencing_epoch=1,
                                         delay_message_ids=ids), broker_ms=at_ms)


def publish(shard: MemoryShard, mid: str, at: int) -> None:
    shard.apply(schedule(mid, at), broker_ms=at - 500)
    shard.apply(admission(shard, mid, f"a-{mid}"), broker_ms=at)
    shard.apply(outcome(mid, f"a-{mid}", r.Outcome.PUBLISHED), broker_ms=at)


def ended_before_retention() -> MemoryShard:
    """``old1`` published and ``old2`` cancelled with no retention; ``waiting`` still
    SCHEDULED; then the first retention (5 s, window 8 s) at 10 s; then ``new`` cancelled."""
    shard = MemoryShard()
    activate(shard)
    publish(shard, "old1", 2 * S)
    shard.apply(schedule("old2", 100 * S), broker_ms=S)
    shard.apply(cancel("old2"), broker_ms=3 * S)
    shard.apply(schedule("waiting", 100 * S), broker_ms=S)
    assert first_retention(shard, 10 * S).status == ResultStatus.APPLIED
    shard.apply(schedule("new", 100 * S), broker_ms=11 * S)
    shard.apply(cancel("new"), broker_ms=11 * S)
    return shard


def retained(shard: MemoryShard) -> list[bytes]:
    return sorted(key for key in shard.data if key[:1] == keys.RETAIN
                  and key[9:10] == keys.RETAIN_MESSAGE)


def test_the_first_retention_records_what_to_catch_up() -> None:
    """The LANE_LIMITS that first gives the lane a retention (asking to catch up) records
    its position, the time (10 s + 5 s) and its result's time (10 s + 8 s); a later one
    keeps it; one that does not ask leaves none, and its value keeps its old bytes."""
    shard = ended_before_retention()
    raw = shard.get(keys.lane_limits_key("local"))
    assert raw is not None
    limits = decode_value(raw, LaneLimit)
    assert isinstance(limits.catch_up, RetainCatchUp)
    assert (limits.catch_up.expire_at_ms, limits.catch_up.result_until_ms) == (15 * S, 18 * S)
    shard.apply(r.LaneLimits(lane="local", retention_ms=S, catch_up=True, **op("later")),
                broker_ms=12 * S)
    again = shard.get(keys.lane_limits_key("local"))
    assert again is not None and decode_value(again, LaneLimit).catch_up == limits.catch_up
    plain = MemoryShard()
    first_retention(plain, 10 * S, catch_up=False)
    raw_plain = plain.get(keys.lane_limits_key("local"))
    assert raw_plain is not None and b"catch_up" not in raw_plain


def test_a_backfill_gives_old_terminal_messages_their_entry_and_nothing_else() -> None:
    """Named: two old terminal messages, a SCHEDULED one, one that ended under retention
    (it has its own entry) and an unknown id: only the two old ones get an entry, at 15 s;
    naming them again changes nothing; a SWEEP at 15 s removes them, and their SCHEDULE
    results go at 18 s."""
    shard = ended_before_retention()
    own = retained(shard)
    assert [keys.split_retain_key(key)[2] for key in own] == ["new"]
    result = backfill(shard, 11 * S, "old1", "old2", "waiting", "new", "ghost")
    assert result.status == ResultStatus.APPLIED
    assert "caught up 2 messages" in (result.detail or "")
    assert sorted(set(retained(shard)) - set(own)) == [
        keys.retain_key(15 * S, keys.RETAIN_MESSAGE, mid) for mid in ("old1", "old2")]
    before = dict(shard.data)
    again = backfill(shard, 12 * S, "old1", "old2", mid="bf2")
    assert "0 retained" in (again.detail or "")
    changed = {k for k in set(before) | set(shard.data) if before.get(k) != shard.data.get(k)}
    assert all(k[:1] in (keys.RESULT, keys.META, keys.RETAIN) for k in changed)
    assert not [k for k in changed if k[:1] == keys.RETAIN and k[9:10] == keys.RETAIN_MESSAGE]
    shard.result(due_sweep(shard, 15 * S, "sw"), broker_ms=15 * S)
    assert shard.message("old1") is None and shard.message("old2") is None
    assert shard.message("waiting") is not None
    assert shard.get(keys.result_key("c/s-old1")) is not None  # until 18 s
    shard.result(due_sweep(shard, 18 * S, "sw2"), broker_ms=18 * S)
    assert shard.get(keys.result_key("c/s-old1")) is None


def test_a_late_backfill_removes_at_once_what_is_already_due() -> None:
    """A backfill applied at 20 s, after the catch-up time (15 s) and result time (18 s):
    the old messages and their SCHEDULE results go at once, with no entry left behind."""
    shard = ended_before_retention()
    backfill(shard, 20 * S, "old1", "old2")
    assert shard.message("old1") is None and shard.message("old2") is None
    assert shard.attempt("a-old1") is None
    assert shard.get(keys.result_key("c/s-old2")) is None
    assert [keys.split_retain_key(k)[2] for k in retained(shard)] == ["new"]
    lane = shard.lane("local")
    assert lane is not None and lane.counts == {"SCHEDULED": 1, "CANCELLED": 1}


def test_no_catch_up_without_a_first_retention_that_asks_for_it() -> None:
    """A first retention that does not ask, or a retention replicated as 0 first: a backfill
    finds nothing eligible; a fenced one is STALE, one naming 501 ids REJECTED."""
    shard = MemoryShard()
    activate(shard)
    shard.apply(schedule("old", 100 * S), broker_ms=S)
    shard.apply(cancel("old"), broker_ms=S)
    first_retention(shard, 10 * S, retention_ms=0)
    first_retention(shard, 11 * S)  # not the first any more: 0 was
    assert "0 retained" in (backfill(shard, 12 * S, "old").detail or "")
    assert shard.message("old") is not None
    fenced = backfill(shard, 12 * S, "old", mid="f", owner="other")
    assert (fenced.status, fenced.reason) == (ResultStatus.STALE, Reason.FENCED)
    many = backfill(shard, 12 * S, *(["old"] * 501), mid="n")
    assert (many.status, many.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)


def kept_then_given_back(*, kept: bool = True) -> MemoryShard:
    """A retention of 5 s at 10 s; ``under`` cancelled at 11 s (its own entry, at 16 s);
    retention 0 at 20 s; ``kept1`` published and ``kept2`` cancelled at 22 s; retention
    5 s again at 30 s (window 8 s); ``waiting`` SCHEDULED throughout. Every LANE_LIMITS
    has ``catch_up_kept`` = ``kept``."""
    shard = MemoryShard()
    activate(shard)
    first_retention(shard, 10 * S, kept=kept)
    shard.apply(schedule("under", 100 * S), broker_ms=11 * S)
    shard.apply(cancel("under"), broker_ms=11 * S)
    shard.apply(schedule("waiting", 100 * S), broker_ms=11 * S)
    assert first_retention(shard, 20 * S, retention_ms=0, kept=kept).status == \
        ResultStatus.APPLIED
    publish(shard, "kept1", 22 * S)
    shard.apply(schedule("kept2", 100 * S), broker_ms=22 * S)
    shard.apply(cancel("kept2"), broker_ms=22 * S)
    assert first_retention(shard, 30 * S, kept=kept).status == ResultStatus.APPLIED
    return shard


def test_a_retention_given_back_catches_up_what_ended_while_it_was_0() -> None:
    """Retention 5 s, then 0 at 20 s, then 5 s again at 30 s: the lane records a catch-up
    for the messages that ended from the 0 to the 5 s (at 35 s, results at 38 s). A backfill
    naming everyone gives ``kept1`` and ``kept2`` an entry at 35 s and skips ``under``
    (its own entry already: never two) and ``waiting``; a SWEEP at 35 s removes the two,
    and ``under`` went at 16 s by its own entry."""
    shard = kept_then_given_back()
    raw = shard.get(keys.lane_limits_key("local"))
    assert raw is not None
    limits = decode_value(raw, LaneLimit)
    assert isinstance(limits.catch_up, RetainCatchUp)  # the first retention's, kept
    (later,) = limits.catch_ups()[1:]
    assert (later.expire_at_ms, later.result_until_ms) == (35 * S, 38 * S)
    assert later.covers(shard.message("kept1").updated_position)  # type: ignore[union-attr]
    assert not later.covers(shard.message("under").updated_position)  # type: ignore[union-attr]
    assert limits.kept_since is msgspec.UNSET
    result = backfill(shard, 31 * S, "under", "kept1", "kept2", "waiting")
    assert "caught up 2 messages (2 retained, 0 removed); 2 not eligible" in (result.detail or "")
    by_id: dict[str, list[int]] = {}
    for key in retained(shard):
        at, _, mid = keys.split_retain_key(key)
        by_id.setdefault(mid, []).append(at)
    assert by_id == {"under": [16 * S], "kept1": [35 * S], "kept2": [35 * S]}
    shard.result(due_sweep(shard, 35 * S, "sw"), broker_ms=35 * S)
    assert [mid for mid in ("under", "kept1", "kept2", "waiting")
            if shard.message(mid) is not None] == ["waiting"]
    assert shard.get(keys.result_key("c/s-kept1")) is not None  # until 38 s
    shard.result(due_sweep(shard, 38 * S, "sw2"), broker_ms=38 * S)
    assert shard.get(keys.result_key("c/s-kept1")) is None


def test_limits_that_do_not_ask_keep_what_ended_while_retention_was_0() -> None:
    """The same history from LANE_LIMITS without ``catch_up_kept`` (an older engine's):
    no later catch-up, nothing remembered, the lane's value has no new field, and a
    backfill finds ``kept1`` and ``kept2`` not eligible."""
    shard = kept_then_given_back(kept=False)
    raw = shard.get(keys.lane_limits_key("local"))
    assert raw is not None and b"kept_since" not in raw and b"later_catch_ups" not in raw
    assert len(decode_value(raw, LaneLimit).catch_ups()) == 1
    assert "0 retained" in (backfill(shard, 31 * S, "kept1", "kept2").detail or "")


def test_a_retention_of_0_first_is_caught_up_from_the_start_when_given_back() -> None:
    """A lane whose first retention is 0 kept everything from the start: when a retention
    is given back, the catch-up covers messages that ended before that 0 too."""
    shard = MemoryShard()
    activate(shard)
    shard.apply(schedule("early", 100 * S), broker_ms=S)
    shard.apply(cancel("early"), broker_ms=S)
    first_retention(shard, 10 * S, retention_ms=0, kept=True)
    shard.apply(schedule("later", 100 * S), broker_ms=11 * S)
    shard.apply(cancel("later"), broker_ms=11 * S)
    first_retention(shard, 20 * S, kept=True)
    assert "caught up 2 messages" in (backfill(shard, 21 * S, "early", "later").detail or "")


@st.composite
def catch_up_logs(draw: st.DrawFn, max_ops: int = 50) -> LogEntries:
    """Messages scheduled, published, cancelled; at a drawn point the lanes' first retention
    (asking to catch up, or not); then owner-style RETAIN_BACKFILLs (every eligible id, plus
    drawn ones) and SWEEPs among the other operations."""
    writer = LogWriter()
    shard, log, add = writer.shard, writer.log, writer.add
    add(barrier())
    count = draw(st.integers(min_value=8, max_value=max_ops))
    limits_at = draw(st.integers(count // 3, count - 1))
    for n in range(count):
        writer.now += draw(st.integers(min_value=0, max_value=400))
        if n == limits_at:
            for lane in ("local", "slow"):
                add(r.LaneLimits(lane=lane, retention_ms=draw(st.integers(0, 4_000)),
                                 dedup_window_ms=draw(st.integers(0, 1_500)),
                                 catch_up=(asks := draw(st.booleans() | st.just(True))),
                                 catch_up_kept=asks,
                                 **op(f"retain-{lane}")))
        mid = draw(st.sampled_from(MIDS))
        kind = draw(st.sampled_from(["schedule", "schedule", "cancel", "cancel", "admit",
                                     "outcome", "redeliver"] if n < limits_at else [
                                     "schedule", "cancel", "admit", "outcome", "backfill",
                                     "backfill", "sweep", "redeliver", "limits", "limits"]))
        message = shard.message(mid)
        if kind == "schedule":
            add(schedule(mid, writer.now + draw(st.integers(0, 1_000)), cmd=f"s{n}",
                         lane=draw(st.sampled_from(["local", "slow"]))))
        elif kind == "cancel":
            add(cancel(mid, cmd=f"c{n}"))
        elif kind == "admit" and message is not None and message.work_digest is not None:
            writer.now = max(writer.now, message.action_at_ms)
            add(admission(shard, mid, f"a{n}", earliest=writer.now))
        elif kind == "outcome" and message is not None and message.open_attempt_id:
            add(outcome(mid, message.open_attempt_id,
                        draw(st.sampled_from([r.Outcome.PUBLISHED, r.Outcome.UNKNOWN])),
                        oid=f"o{n}"))
        elif kind == "backfill":
            eligible = [m for m in MIDS if catch_up_of(shard.get, shard.message(m))]
            extra = draw(st.lists(st.sampled_from(MIDS), max_size=3))
            add(r.RetainBackfill(mutation_id=f"bf{n}", owner_id=OWNER, fencing_epoch=1,
                                 delay_message_ids=tuple(eligible + extra)))
        elif kind == "sweep":
            add(due_sweep(shard, writer.now, f"sw{n}"))
        elif kind == "limits":  # lane local's retention to 0 (kept) and back, asking or not
            lane = "local"
            held = shard.get(keys.lane_limits_key(lane))
            kept = held is not None and decode_value(held, LaneLimit).retention_ms == 0
            add(r.LaneLimits(lane=lane, retention_ms=draw(st.sampled_from(
                                 [900, 3_000, 0] if kept else [0, 0, 900])),
                             dedup_window_ms=draw(st.integers(0, 1_500)), catch_up=True,
                             catch_up_kept=draw(st.booleans() | st.just(True)),
                             **op(f"limits-{lane}-{n}")))
        elif kind == "redeliver" and len(log) > 1:
            add(draw(st.sampled_from(log[1:]))[0])
    return log


@settings(max_examples=40, deadline=None)
@given(catch_up_logs(), st.data())
def test_live_replay_and_checkpoint_agree_with_backfills(entries: LogEntries,
                                                         data: st.DataObject) -> None:
    """A log with a first retention, retentions set to 0 and back, RETAIN_BACKFILLs and
    SWEEPs: applied live in batches into RocksDB, replayed from empty in memory, and
    restored from a copy taken mid-way then caught up, the three digests are equal. Once
    the owner has named every id and swept far ahead: no message had two entries, none a
    catch-up covers is left, and when every LANE_LIMITS asked to catch up, no terminal
    message is left in a lane that has a retention now."""
    shard = replayed_in_agreement(entries, data)
    end = (entries[-1][1] if entries else 0) + 10**9
    decoded = [r.decode(raw) for raw, _ in entries]
    asked = all(x.catch_up is True and x.catch_up_kept is True
                for x in decoded if isinstance(x, r.LaneLimits))
    shard.apply(r.RetainBackfill(mutation_id="final", owner_id=OWNER, fencing_epoch=1,
                                 delay_message_ids=tuple(MIDS)), broker_ms=end)
    entries_of = Counter(keys.split_retain_key(key)[2] for key in retained(shard))
    assert all(count == 1 for count in entries_of.values()), entries_of  # never two
    shard.apply(due_sweep(shard, end, "final-sweep"), broker_ms=end)
    for mid in MIDS:
        message = shard.message(mid)
        assert message is None or catch_up_of(shard.get, message) is None
        if message is not None and message.state in TERMINAL_STATES:
            held = shard.get(keys.lane_limits_key(message.lane))
            limits = None if held is None else decode_value(held, LaneLimit)
            covered = limits is not None and any(
                c.covers(message.updated_position) for c in limits.catch_ups())
            assert not covered, f"{mid} ended in a catch-up's range and is still here"
            # every LANE_LIMITS asked to catch up: a lane with a retention now keeps nothing
            assert not (asked and limits is not None and limits.retention_ms), \
                f"{mid} is terminal under retention {limits.retention_ms} and still here"
