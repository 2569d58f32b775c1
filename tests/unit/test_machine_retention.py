"""Retention (``nereus.machine.retention``): terminal messages and dedup results go after
their lane's retention and dedup window, by SWEEP records whose keys and broker time are
in the log, so live, replay and replay from a checkpoint keep equal digests."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nereus import records as r
from nereus.machine import Reason
from nereus.records import MessageState, ResultStatus
from nereus.records.vocabulary import TERMINAL_STATES
from nereus.state import keys
from nereus.state.values import (
    LaneLimit,
    Message,
    PayloadStage,
    Result,
    decode_value,
)
from nereus.testing import MemoryShard
from tests.unit.builders import activate, admission, cancel, op, outcome, schedule
from tests.unit.logs import IDENTITY, LogEntries, due_sweep, live_and_restored_digests, shard_logs

S = 1_000  # one second, in ms


def retained(shard: MemoryShard, *, retention_ms: int = 10 * S,
             dedup_window_ms: int = 20 * S) -> MemoryShard:
    """``shard`` with lane ``local``'s retention and dedup window set and an owner."""
    result = shard.result(r.LaneLimits(lane="local", retention_ms=retention_ms,
                                       dedup_window_ms=dedup_window_ms, **op("retention")))
    assert result.status == ResultStatus.APPLIED
    activate(shard)
    return shard


def publish(shard: MemoryShard, mid: str, at: int) -> None:
    """Schedule ``mid`` due at ``at`` and publish it there (admission, PUBLISHED)."""
    shard.apply(schedule(mid, at), broker_ms=at - 500)
    shard.apply(admission(shard, mid, f"a-{mid}"), broker_ms=at)
    shard.apply(outcome(mid, f"a-{mid}", r.Outcome.PUBLISHED), broker_ms=at)


def sweep(shard: MemoryShard, now_ms: int, mid: str = "sw") -> Result:
    return shard.result(due_sweep(shard, now_ms, mid), broker_ms=now_ms)


def family(shard: MemoryShard, prefix: bytes) -> list[bytes]:
    return [key for key in shard.data if key[:1] == prefix]


def test_a_published_message_and_its_attempts_go_after_the_retention() -> None:
    """PUBLISHED at 5 s with a 10 s retention: a SWEEP at 14.999 s removes nothing, one at
    15 s removes the message, its attempt, its attempt number and leaves the lane's counts
    without it; the SCHEDULE's result stays until its dedup window ends."""
    shard = retained(MemoryShard())
    publish(shard, "m1", 5 * S)
    assert sorted(family(shard, keys.RETAIN))[0] == keys.retain_key(
        15 * S, keys.RETAIN_MESSAGE, "m1")  # the oldest retained item is the first key
    early = shard.result(r.Sweep(mutation_id="early", owner_id="owner-a", fencing_epoch=1,
                                 entries=tuple(family(shard, keys.RETAIN))), broker_ms=15 * S - 1)
    assert early.status == ResultStatus.APPLIED and "swept 0 messages" in (early.detail or "")
    assert shard.message("m1") is not None
    assert sweep(shard, 15 * S).status == ResultStatus.APPLIED
    assert shard.message("m1") is None
    assert shard.attempt("a-m1") is None
    assert family(shard, keys.MSG_ATTEMPT) == []
    lane = shard.lane("local")
    assert lane is not None and lane.counts == {}
    assert shard.get(keys.result_key("c/s-m1")) is not None  # the window runs to 25 s
    assert keys.retain_key(25 * S, keys.RETAIN_RESULT, "c/s-m1") in shard.data
    sweep(shard, 25 * S, "sw2")
    assert shard.get(keys.result_key("c/s-m1")) is None
    assert shard.get(keys.result_key("a/a-m1")) is None
    assert [k for k in family(shard, keys.RETAIN) if k[9:10] != keys.RETAIN_RESULT] == []


def test_pending_messages_are_never_touched() -> None:
    """A SCHEDULED and an UNCERTAIN message, a SWEEP naming forged keys for them far in the
    past: both stay, with their results."""
    shard = retained(MemoryShard())
    shard.apply(schedule("waiting", 100 * S), broker_ms=S)
    shard.apply(schedule("unsure", 2 * S), broker_ms=S)
    shard.apply(admission(shard, "unsure", "a-u"), broker_ms=2 * S)
    shard.apply(outcome("unsure", "a-u", r.Outcome.UNKNOWN), broker_ms=2 * S)
    forged = tuple(keys.retain_key(0, keys.RETAIN_MESSAGE, mid) for mid in ("waiting", "unsure"))
    shard.data.update((key, b"") for key in forged)  # as if an entry had been written
    result = shard.result(r.Sweep(mutation_id="f", owner_id="owner-a", fencing_epoch=1,
                                  entries=forged), broker_ms=1_000 * S)
    assert result.status == ResultStatus.APPLIED
    waiting, unsure = shard.message("waiting"), shard.message("unsure")
    assert waiting is not None and waiting.state == MessageState.SCHEDULED
    assert unsure is not None and unsure.state == MessageState.UNCERTAIN
    assert shard.attempt("a-u") is not None
    assert shard.get(keys.result_key("c/s-waiting")) is not None


def test_a_cancelled_message_never_comes_back_from_a_retried_schedule() -> None:
    """CANCELLED, swept after its retention (5 s) while the dedup window (20 s) runs: the
    very same SCHEDULE again answers its first result and creates nothing; after the
    window it is a new command and creates a new message."""
    shard = retained(MemoryShard(), retention_ms=5 * S)
    first = shard.result(schedule("m1", 100 * S), broker_ms=S)
    shard.apply(cancel("m1"), broker_ms=2 * S)
    sweep(shard, 7 * S)
    assert shard.message("m1") is None
    again = shard.apply(schedule("m1", 100 * S), broker_ms=8 * S)
    assert again.duplicate and again.result == first
    assert shard.message("m1") is None
    sweep(shard, 22 * S, "sw2")
    assert shard.get(keys.result_key("c/s-m1")) is None
    new = shard.apply(schedule("m1", 100 * S), broker_ms=23 * S)
    assert not new.duplicate and new.result.status == ResultStatus.APPLIED
    message = shard.message("m1")
    assert message is not None and message.state == MessageState.SCHEDULED


def test_a_schedule_result_stays_while_its_message_does() -> None:
    """Dedup window 1 s, retention 50 s: the SCHEDULE's result outlives its window because
    its message is still there; a retry still answers APPLIED, not MESSAGE_EXISTS."""
    shard = retained(MemoryShard(), retention_ms=50 * S, dedup_window_ms=S)
    first = shard.result(schedule("m1", 3 * S), broker_ms=S)
    sweep(shard, 30 * S)
    assert shard.apply(schedule("m1", 3 * S), broker_ms=31 * S).result == first


def test_other_results_go_after_the_dedup_window_and_a_reused_id_is_new() -> None:
    """A REJECTED CANCEL (no such message) in lane-less land is kept; a CANCEL of a lane's
    message leaves a result that goes after the window, then the same command id is a new
    command (MESSAGE_TERMINAL now, where it was APPLIED)."""
    shard = retained(MemoryShard(), retention_ms=0, dedup_window_ms=5 * S)
    shard.apply(schedule("m1", 100 * S), broker_ms=S)
    assert shard.result(cancel("m1"), broker_ms=2 * S).status == ResultStatus.APPLIED
    shard.apply(cancel("ghost"), broker_ms=2 * S)
    sweep(shard, 7 * S)
    assert shard.get(keys.result_key("c/c-m1")) is None
    assert shard.get(keys.result_key("c/c-ghost")) is not None  # no lane: kept
    assert shard.message("m1") is not None  # retention 0: kept
    again = shard.result(cancel("m1"), broker_ms=8 * S)
    assert (again.status, again.reason) == (ResultStatus.REJECTED, Reason.MESSAGE_TERMINAL)


def test_lanes_without_retention_keep_everything_and_write_no_retain_keys() -> None:
    """LANE_LIMITS from before retention (no retention fields): nothing is retained, the
    limits value keeps its old bytes, and a SWEEP finds nothing."""
    shard = MemoryShard()
    shard.apply(r.LaneLimits(lane="local", max_delay_ms=S, **op("old")))
    raw = shard.get(keys.lane_limits_key("local"))
    assert raw is not None and b"retention" not in raw
    activate(shard)
    publish(shard, "m1", 5 * S)
    assert family(shard, keys.RETAIN) == []
    sweep(shard, 10**12)
    assert shard.message("m1") is not None


def test_limits_without_retention_fields_keep_the_replicated_ones() -> None:
    """A later LANE_LIMITS that leaves retention UNSET keeps the lane's retention."""
    shard = retained(MemoryShard())
    shard.apply(r.LaneLimits(lane="local", max_pending=3, **op("later")))
    raw = shard.get(keys.lane_limits_key("local"))
    assert raw is not None
    limits = decode_value(raw, LaneLimit)
    assert (limits.max_pending, limits.retention_ms, limits.dedup_window_ms) == (3, 10 * S, 20 * S)


def commit_payload(shard: MemoryShard, payload_id: str) -> None:
    """Reserve and commit a 10-byte payload ``payload_id`` on ``shard``."""
    sha = "a" * 64
    shard.apply(r.PayloadReserve(command_id=f"r-{payload_id}", payload_id=payload_id,
                                 size_bytes=10, sha256=sha, expires_at_ms=10**12))
    shard.apply(r.PayloadCommit(command_id=f"c-{payload_id}", payload_id=payload_id,
                                size_bytes=10, sha256=sha, object_key=f"payloads/{payload_id}"))


def test_a_large_payload_stage_goes_with_its_message() -> None:
    """A message that used a committed payload: swept, its PayloadStage goes too."""
    shard = retained(MemoryShard())
    commit_payload(shard, "p1")
    shard.apply(schedule("m1", 100 * S, payload_ref="p1"), broker_ms=S)
    shard.apply(cancel("m1"), broker_ms=2 * S)
    assert shard.get(keys.payload_key("p1")) is not None
    sweep(shard, 12 * S)
    assert shard.get(keys.payload_key("p1")) is None


def test_a_committed_payload_belongs_to_the_one_message_that_used_it() -> None:
    """A second SCHEDULE naming a payload another message uses is REJECTED PAYLOAD_IN_USE
    (naming that message), so sweeping the first can never take the stage, and with it the
    object, from under a second message still due. Once swept, the payload is unknown."""
    shard = retained(MemoryShard())
    commit_payload(shard, "p1")
    unused = shard.get(keys.payload_key("p1"))
    assert unused is not None and b"used_by" not in unused  # the bytes it had before
    assert shard.result(schedule("m1", 100 * S, payload_ref="p1"),
                        broker_ms=S).status == ResultStatus.APPLIED
    second = shard.result(schedule("m2", 200 * S, payload_ref="p1"), broker_ms=S)
    assert (second.status, second.reason) == (ResultStatus.REJECTED, Reason.PAYLOAD_IN_USE)
    assert second.detail is not None and "message m1" in second.detail
    assert shard.message("m2") is None
    raw = shard.get(keys.payload_key("p1"))
    assert raw is not None and decode_value(raw, PayloadStage).used_by == "m1"

    shard.apply(cancel("m1"), broker_ms=2 * S)
    sweep(shard, 12 * S)
    assert shard.get(keys.payload_key("p1")) is None
    third = shard.result(schedule("m3", 300 * S, payload_ref="p1"), broker_ms=13 * S)
    assert third.reason == Reason.UNKNOWN_PAYLOAD


def test_a_fenced_or_malformed_sweep_removes_nothing() -> None:
    """A SWEEP of another owner is STALE FENCED; one naming a non-retain key, or too many
    keys, is REJECTED INVALID_FIELD; nothing is removed either way."""
    shard = retained(MemoryShard(), retention_ms=S)
    publish(shard, "m1", 5 * S)
    due = due_sweep(shard, 100 * S, "x").entries
    fenced = shard.result(r.Sweep(mutation_id="f", owner_id="other", fencing_epoch=1,
                                  entries=due), broker_ms=100 * S)
    assert (fenced.status, fenced.reason) == (ResultStatus.STALE, Reason.FENCED)
    bad = shard.result(r.Sweep(mutation_id="b", owner_id="owner-a", fencing_epoch=1,
                               entries=(keys.msg_key("m1"),)), broker_ms=100 * S)
    assert (bad.status, bad.reason) == (ResultStatus.REJECTED, Reason.INVALID_FIELD)
    many = shard.result(r.Sweep(mutation_id="n", owner_id="owner-a", fencing_epoch=1,
                                entries=due * 501), broker_ms=100 * S)
    assert many.status == ResultStatus.REJECTED
    assert shard.message("m1") is not None


def _replay(entries: LogEntries) -> MemoryShard:
    shard = MemoryShard(identity=IDENTITY)
    for data, ms in entries:
        shard.apply(data, broker_ms=ms)
    return shard


@settings(max_examples=40, deadline=None)
@given(shard_logs(max_ops=60, retention=True), st.data())
def test_live_replay_and_checkpoint_agree_with_sweeps(entries: LogEntries,
                                                      data: st.DataObject) -> None:
    """A log with retention and SWEEPs: applied live in batches into RocksDB, replayed
    from empty in memory, and restored from a copy taken mid-way then caught up, the
    three digests are equal; nothing unfinished was removed, and every message left
    that is terminal and due by the last SWEEP's time is one the sweep had not named."""
    cut = data.draw(st.integers(min_value=0, max_value=len(entries)))
    batch = data.draw(st.integers(min_value=1, max_value=9))
    live_digest, restored_digest = live_and_restored_digests(entries, cut=cut, batch=batch)
    replayed = _replay(entries)
    assert live_digest == restored_digest == replayed.digest()
    for key in replayed.data:
        if key[:1] == keys.RETAIN and key[9:10] == keys.RETAIN_MESSAGE:
            message = replayed.message(keys.split_retain_key(key)[2])
            assert message is not None and message.state in TERMINAL_STATES


@settings(max_examples=40, deadline=None)
@given(shard_logs(max_ops=60, retention=True))
def test_a_sweep_never_touches_an_unfinished_message(entries: LogEntries) -> None:
    """Before and after every SWEEP, each unfinished message (and its open attempt) is the
    same; every message a SWEEP removed was terminal and due by its broker time."""
    shard = MemoryShard(identity=IDENTITY)
    for data, ms in entries:
        before = {key: raw for key, raw in shard.data.items()
                  if key[:1] == keys.MSG and decode_value(raw, Message).state
                  not in TERMINAL_STATES}
        shard.apply(data, broker_ms=ms)
        if not isinstance(r.decode(data), r.Sweep):
            continue
        for key, raw in before.items():
            assert shard.data.get(key) == raw
