"""Results and rejects written while a shard had no dedup window (none yet, or 0) are
caught up once it is given one (``nereus.machine.retention``: ``ResultCatchUp``,
RETAIN_BACKFILL's ``result_keys`` and ``reject_positions``): each gets one entry, never a
second, decided from the record and the state alone, so live and replay agree."""

from __future__ import annotations

from collections import Counter

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus import records as r
from nereus.machine import Reason
from nereus.machine.catch_up import SHARD_WINDOW_KINDS, reject_catch_up_of, result_catch_up_of
from nereus.records import ResultStatus
from nereus.state import keys
from nereus.state.values import Result, ShardRetentionValue, decode_value
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, activate, barrier, op, schedule
from tests.unit.logs import (
    LogEntries,
    LogWriter,
    due_sweep,
    replayed_in_agreement,
)
from tests.unit.test_machine_shard_retention import LANELESS, S, retained, sweep


def _give(shard: MemoryShard, window_ms: int, at_ms: int, *,
          results: bool | None = True) -> Result:
    """A SHARD_RETENTION of ``window_ms`` at ``at_ms`` asking to catch up stages, and
    results when ``results`` (None: the field unset, as an older engine wrote it)."""
    return shard.result(r.ShardRetention(
        dedup_window_ms=window_ms, catch_up=True,
        catch_up_results=msgspec.UNSET if results is None else results,
        **op(f"give-{window_ms}-{at_ms}")), broker_ms=at_ms)


def _catch_up_results(shard: MemoryShard, at_ms: int, *result_keys: str,
                      rejects: tuple[int, ...] = (), mid: str = "bfr") -> Result:
    return shard.result(r.RetainBackfill(
        mutation_id=mid, owner_id=OWNER, fencing_epoch=1, delay_message_ids=(),
        result_keys=result_keys, reject_positions=rejects), broker_ms=at_ms)


def kept_results(*, results: bool | None = True) -> tuple[MemoryShard, int]:
    """No shard window: the laneless records, a scheduled message and a garbage record at
    1 s keep their results and reject with no entry; a window of 5 s is given at 20 s
    (``results``: its ``catch_up_results``). The garbage record's position."""
    shard = MemoryShard()
    activate(shard)
    for record in LANELESS:
        shard.apply(record, broker_ms=S)
    shard.apply(schedule("m1", 100 * S), broker_ms=S)
    bad = shard.apply(b"garbage", broker_ms=S).result.position
    assert [key for key in shard.data if key[:1] == keys.RETAIN] == []
    assert _give(shard, 5 * S, 20 * S, results=results).status == ResultStatus.APPLIED
    return shard, bad


def test_results_and_rejects_from_before_a_window_are_caught_up_once_one_is_given() -> None:
    """The window given at 20 s records a result catch-up from the start to it, at 25 s; a
    backfill at 21 s gives the laneless results and the reject their entry at 25 s and
    skips the results of lane records (a cancel of no message, a SCHEDULE), an unknown
    key and position; naming them again adds nothing; a SWEEP at 25 s removes them all.
    A backfill after 25 s removes them at once."""
    shard, bad = kept_results()
    held = shard.get(keys.META_SHARD_RETENTION)
    assert held is not None
    catch_ups = decode_value(held, ShardRetentionValue).catch_ups()
    assert [(c.after_position, c.expire_at_ms) for c in catch_ups] == [(0, 25 * S)]
    laneless = ["c/q1", "c/pr", "m/close", "s/ck"]
    done = _catch_up_results(shard, 21 * S, *laneless, "c/c-ghost", "c/c-m1", "c/none",
                             rejects=(bad, bad + 1000))
    assert "5 results caught up (5 retained, 0 removed), 4 not eligible" in \
        (done.detail or ""), done.detail
    assert set(laneless) <= set(retained(shard, keys.RETAIN_RESULT))
    assert not {"c/c-ghost", "c/c-m1"} & set(retained(shard, keys.RETAIN_RESULT))
    assert retained(shard, keys.RETAIN_REJECT) == [str(bad)]
    assert {keys.split_retain_key(k)[0] for k in shard.data if k[:1] == keys.RETAIN
            and keys.split_retain_key(k)[2] in {*laneless, str(bad)}} == {25 * S}
    again = _catch_up_results(shard, 22 * S, *laneless, rejects=(bad,), mid="bfr2")
    assert "0 results caught up (0 retained, 0 removed), 5 not eligible" in \
        (again.detail or ""), again.detail
    sweep(shard, 25 * S, "sw")
    assert [key for key in laneless if shard.get(keys.result_key(key)) is not None] == []
    assert shard.get(keys.reject_key(bad)) is None
    assert shard.get(keys.result_key("c/c-ghost")) is not None  # a lane record's: kept
    late, bad = kept_results()
    removed = _catch_up_results(late, 26 * S, "c/q1", rejects=(bad,))
    assert "2 results caught up (0 retained, 2 removed)" in (removed.detail or "")
    assert late.get(keys.result_key("c/q1")) is None and late.get(keys.reject_key(bad)) is None


def test_a_window_given_back_after_0_catches_up_only_what_was_written_meanwhile() -> None:
    """Window 5 s, ``before`` (and a reject) at 1 s with entries of their own; 0 at 2 s;
    ``kept`` and a reject at 3 s with none; the window given back at 20 s catches up only
    the two of 3 s (entries at 25 s). ``before``'s own entry removes it at 21 s and a query
    reusing its key at 22 s is a new result with its own entry: naming that key is not
    eligible, so no entry from before can remove the new result early."""
    shard = MemoryShard()
    activate(shard)
    _give(shard, 5 * S, 0)
    shard.apply(r.QueryBarrier(command_id="before"), broker_ms=S)
    early = shard.apply(b"garbage-1", broker_ms=S).result.position
    _give(shard, 0, 2 * S)
    shard.apply(r.QueryBarrier(command_id="kept"), broker_ms=3 * S)
    bad = shard.apply(b"garbage-3", broker_ms=3 * S).result.position
    _give(shard, 5 * S, 20 * S)
    done = _catch_up_results(shard, 20 * S, "c/before", "c/kept", rejects=(early, bad))
    assert "2 results caught up (2 retained, 0 removed), 2 not eligible" in \
        (done.detail or ""), done.detail
    sweep(shard, 21 * S, "sw")
    assert shard.get(keys.result_key("c/before")) is None
    assert shard.get(keys.result_key("c/kept")) is not None  # its entry is at 25 s
    again = shard.result(r.QueryBarrier(command_id="before"), broker_ms=22 * S)
    assert again.status == ResultStatus.APPLIED
    named = _catch_up_results(shard, 23 * S, "c/before", mid="bfr2")
    assert "0 results caught up (0 retained, 0 removed), 1 not eligible" in \
        (named.detail or ""), named.detail
    assert [keys.split_retain_key(k)[0] for k in shard.data if k[:1] == keys.RETAIN
            and keys.split_retain_key(k)[2] == "c/before"] == [27 * S]


def test_a_window_given_without_asking_for_results_leaves_them_and_old_bytes() -> None:
    """The same history from a SHARD_RETENTION without ``catch_up_results`` (an older
    engine's): no result catch-up, the value has no new field, nothing is eligible."""
    shard, bad = kept_results(results=None)
    held = shard.get(keys.META_SHARD_RETENTION)
    assert held is not None and b"result_catch_ups" not in held
    done = _catch_up_results(shard, 21 * S, "c/q1", rejects=(bad,))
    assert "0 results caught up (0 retained, 0 removed), 2 not eligible" in \
        (done.detail or ""), done.detail


def test_a_backfill_naming_a_position_no_reject_key_holds_is_refused() -> None:
    """A reject position below 0 (MessagePack carries no integer beyond a u64) is refused
    (INVALID_FIELD) before any read, and so are more than 500 ids and positions in all."""
    shard, _ = kept_results()
    for position in (-1, -2**63):
        refused = _catch_up_results(shard, 21 * S, rejects=(position,), mid=f"bad{position}")
        assert (refused.status, refused.reason) == (ResultStatus.REJECTED,
                                                    Reason.INVALID_FIELD), refused.detail
        assert "reject_positions[0]" in (refused.detail or "")
    many = _catch_up_results(shard, 21 * S, *[f"c/q{n}" for n in range(300)],
                             rejects=tuple(range(201)), mid="many")
    assert many.reason == Reason.INVALID_FIELD
    assert "at most 500 messages, payload stages and results, not 501" in (many.detail or "")


def test_a_first_window_of_0_is_caught_up_from_the_start_when_given_back() -> None:
    """No window, ``early`` at 1 s; a first SHARD_RETENTION of 0 at 2 s (asking) records
    that results have had no entry from the start; ``kept`` at 3 s; the window given at
    20 s catches up both (a range from position 0)."""
    shard = MemoryShard()
    activate(shard)
    shard.apply(r.QueryBarrier(command_id="early"), broker_ms=S)
    _give(shard, 0, 2 * S)
    shard.apply(r.QueryBarrier(command_id="kept"), broker_ms=3 * S)
    _give(shard, 5 * S, 20 * S)
    held = shard.get(keys.META_SHARD_RETENTION)
    assert held is not None
    assert [c.after_position for c in decode_value(held, ShardRetentionValue).catch_ups()] == [0]
    done = _catch_up_results(shard, 21 * S, "c/early", "c/kept")
    assert "2 results caught up (2 retained, 0 removed), 0 not eligible" in \
        (done.detail or ""), done.detail


QUERIES = ("q0", "q1", "q2")  # few ids: a key a sweep freed is reused


def eligible(shard: MemoryShard) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """What the owner's scan would name now: result keys and reject positions."""
    results = tuple(key[1:].decode() for key in sorted(shard.data) if key[:1] == keys.RESULT
                    and result_catch_up_of(shard.get, key[1:].decode()) is not None)
    rejects = tuple(int.from_bytes(key[1:], "big") for key in sorted(shard.data)
                    if key[:1] == keys.REJECT
                    and reject_catch_up_of(shard.get, int.from_bytes(key[1:], "big")))
    return results, rejects


@st.composite
def result_logs(draw: st.DrawFn, max_ops: int = 50) -> LogEntries:
    """Query barriers reusing three ids, garbage records, lane gates, the shard's window
    set and taken back to 0 (asking to catch up, or not), owner-style RETAIN_BACKFILLs
    (every eligible result and reject, plus drawn ones), SWEEPs and redeliveries."""
    writer = LogWriter()
    shard, log, add = writer.shard, writer.log, writer.add
    add(barrier())
    for n in range(draw(st.integers(min_value=4, max_value=max_ops))):
        writer.now += draw(st.integers(min_value=0, max_value=600))
        kind = draw(st.sampled_from(["query", "query", "garbage", "gate", "window", "window",
                                     "backfill", "backfill", "sweep", "redeliver"]))
        if kind == "query":
            add(r.QueryBarrier(command_id=draw(st.sampled_from(QUERIES))))
        elif kind == "garbage":
            add(f"garbage-{n}".encode())
        elif kind == "gate":
            add(r.LaneGate(lane="local", gate=draw(st.sampled_from(list(r.Gate))),
                           **op(f"g{n}")))
        elif kind == "window":
            held = shard.get(keys.META_SHARD_RETENTION)
            window = 0 if held is None else decode_value(held, ShardRetentionValue).dedup_window_ms
            asks = draw(st.booleans() | st.just(True))
            add(r.ShardRetention(dedup_window_ms=draw(st.sampled_from(
                                     [700, 2_000, 0] if not window else [0, 0, 1_500])),
                                 catch_up=asks, catch_up_results=asks, **op(f"w{n}")))
        elif kind == "backfill":
            results, rejects = eligible(shard)
            extra = draw(st.lists(st.sampled_from(QUERIES), max_size=2))
            add(r.RetainBackfill(
                mutation_id=f"bf{n}", owner_id=OWNER, fencing_epoch=1, delay_message_ids=(),
                result_keys=results + tuple("c/" + q for q in extra),
                reject_positions=rejects + tuple(draw(st.lists(
                    st.integers(0, len(log)), max_size=2)))))
        elif kind == "sweep":
            add(due_sweep(shard, writer.now, f"sw{n}"))
        elif kind == "redeliver" and len(log) > 1:
            add(draw(st.sampled_from(log[1:]))[0])
    return log


def entries_by_item(shard: MemoryShard) -> Counter[tuple[bytes, str]]:
    return Counter(keys.split_retain_key(key)[1:] for key in shard.data
                   if key[:1] == keys.RETAIN and key[9:10] != keys.RETAIN_MESSAGE)


@settings(max_examples=40, deadline=None)
@given(result_logs(), st.data())
def test_live_replay_and_checkpoint_agree_and_no_result_has_two_entries(
        entries: LogEntries, data: st.DataObject) -> None:
    """A log whose shard window goes to 0 and back, with backfills naming results and
    rejects: applied live in batches into RocksDB, replayed from empty in memory, and
    restored from a copy taken mid-way then caught up, the three digests are equal. No
    result or reject has two entries, and every entry names one that is still there (an
    entry outliving its result could remove a later one reusing the key). Once the owner
    has named everything and swept far ahead: when every SHARD_RETENTION asked and the
    shard has a window now, no result of a record without a lane window and no reject is
    left but the final records' own."""
    shard = replayed_in_agreement(entries, data)

    def check_entries() -> None:
        for (kind, ident), count in entries_by_item(shard).items():
            assert count == 1, (kind, ident)  # never two
            held = keys.result_key(ident) if kind == keys.RETAIN_RESULT else \
                keys.reject_key(int(ident)) if kind == keys.RETAIN_REJECT else None
            assert held is None or shard.get(held) is not None, (kind, ident)

    check_entries()
    end = entries[-1][1] + 10**9
    results, rejects = eligible(shard)
    shard.apply(r.RetainBackfill(mutation_id="final", owner_id=OWNER, fencing_epoch=1,
                                 delay_message_ids=(), result_keys=results,
                                 reject_positions=rejects), broker_ms=end)
    check_entries()
    shard.apply(due_sweep(shard, end, "final-sweep"), broker_ms=end)
    check_entries()
    windows = [x for x in (r.decode(raw) for raw, _ in entries) if isinstance(x, r.ShardRetention)]
    held = shard.get(keys.META_SHARD_RETENTION)
    if held is not None and decode_value(held, ShardRetentionValue).dedup_window_ms and all(
            x.catch_up_results is True for x in windows):
        left = [key for key in shard.data if key[:1] == keys.REJECT or (
            key[:1] == keys.RESULT and decode_value(shard.data[key], Result).kind
            in SHARD_WINDOW_KINDS)]
        assert left == [], left


def test_a_backfills_summary_counts_the_results_and_rejects_it_names() -> None:
    """``shard log``'s one-line summary of a RETAIN_BACKFILL names how many results and
    rejects it catches up, beside the messages; one naming neither reads as before."""
    from nereus.records.summary import summarize

    named = r.RetainBackfill(mutation_id="bf", owner_id=OWNER, fencing_epoch=1,
                             delay_message_ids=("m1",), result_keys=("c/q", "m/k"),
                             reject_positions=(7,))
    assert summarize(named) == ("catch up retention of 1 messages and 2 results and 1 "
                                f"rejects owner={OWNER} epoch=1")
    plain = r.RetainBackfill(mutation_id="bf", owner_id=OWNER, fencing_epoch=1,
                             delay_message_ids=("m1",))
    assert summarize(plain) == f"catch up retention of 1 messages owner={OWNER} epoch=1"
