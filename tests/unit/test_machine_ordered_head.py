"""The ordered head is kept by apply: on an ORDERED lane, a key's messages are admitted in
deliverAt order (source order among equal deliverAt), one at a time.

Each unfinished keyed message of an ORDERED lane has an ``order`` entry (``keys.py``):
in-flight ones (PUBLISHING, UNCERTAIN) first, then SCHEDULED ones by deliverAt. A
PUBLISH_ADMISSION for a message that is not the first entry of its key is STALE
``NOT_ORDERED_HEAD`` naming the head, whatever put the head back on the timeline (a
retriable failure, a decline, a resolve) or scheduled an earlier message meanwhile.
Before, the head was whatever the timeline (by actionAt) yielded first, and a retry's
backoff let later messages of its key overtake it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nereus import records as r
from nereus.machine import Reason
from nereus.records import Disposition, MessageState, Outcome, ResultStatus
from nereus.state import keys
from nereus.testing import MemoryShard
from tests.unit.builders import admission, cancel, op, outcome, reschedule, schedule


def ordered_shard() -> MemoryShard:
    shard = MemoryShard()
    assert shard.result(r.LaneConfig(lane="local", ordered=True, retry_backoff_ms=1_000,
                                     **op("ordered"))).status == ResultStatus.APPLIED
    return shard


def admit(shard: MemoryShard, mid: str, attempt: str, at: int) -> r.Result:
    return shard.result(admission(shard, mid, attempt, earliest=at), broker_ms=at)


def test_a_retried_head_is_not_overtaken_by_later_messages_of_its_key() -> None:
    """m1 (deliverAt 100) fails retriably and goes back on the timeline at 1,100; m2
    (deliverAt 200, due first now) is STALE NOT_ORDERED_HEAD naming m1 until m1 is
    published, then admitted."""
    shard = ordered_shard()
    shard.apply(schedule("m1", 100, key="k"))
    shard.apply(schedule("m2", 200, key="k"))
    assert admit(shard, "m1", "a1", 100).status == ResultStatus.APPLIED
    shard.apply(outcome("m1", "a1", Outcome.NOT_PUBLISHED, Disposition.RETRIABLE),
                broker_ms=150)
    m1 = shard.message("m1")
    assert m1 is not None and m1.state == MessageState.SCHEDULED and m1.action_at_ms > 200
    held = admit(shard, "m2", "a2", 300)
    assert (held.status, held.reason) == (ResultStatus.STALE, Reason.NOT_ORDERED_HEAD)
    assert "m1" in (held.detail or "")
    assert admit(shard, "m1", "a1b", m1.action_at_ms).status == ResultStatus.APPLIED
    shard.apply(outcome("m1", "a1b", Outcome.PUBLISHED), broker_ms=m1.action_at_ms)
    assert admit(shard, "m2", "a2b", m1.action_at_ms + 1).status == ResultStatus.APPLIED


def test_a_declined_head_keeps_its_place() -> None:
    """A head declined before any send (NOT_PUBLISHED LANE_UNAVAILABLE) goes back on the
    timeline later, and still holds its key."""
    shard = ordered_shard()
    shard.apply(schedule("m1", 100, key="k"))
    shard.apply(schedule("m2", 101, key="k"))
    admit(shard, "m1", "a1", 100)
    shard.apply(outcome("m1", "a1", Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE),
                broker_ms=100)
    assert admit(shard, "m2", "a2", 500).reason == Reason.NOT_ORDERED_HEAD


def test_an_open_attempt_holds_its_key_against_an_earlier_newcomer() -> None:
    """While m2's attempt is PUBLISHING (or UNCERTAIN), a message of its key scheduled
    later with an earlier deliverAt waits for it."""
    shard = ordered_shard()
    shard.apply(schedule("m2", 200, key="k"))
    admit(shard, "m2", "a2", 200)
    shard.apply(schedule("m1", 100, key="k"), broker_ms=210)
    assert admit(shard, "m1", "a1", 220).reason == Reason.NOT_ORDERED_HEAD
    shard.apply(outcome("m2", "a2", Outcome.UNKNOWN), broker_ms=230)
    assert admit(shard, "m1", "a1b", 240).reason == Reason.NOT_ORDERED_HEAD
    shard.apply(r.AttemptResolve(attempt_id="a2", resolution=r.Resolution.PUBLISHED,
                                 evidence="seen",
                                 **op("resolve")), broker_ms=250)
    assert admit(shard, "m1", "a1c", 260).status == ResultStatus.APPLIED


def test_an_earlier_message_scheduled_after_a_claim_wins_the_head() -> None:
    """m2 is claimed (its admission prepared) when m1, earlier, is applied: m2's admission
    is STALE, m1 goes first."""
    shard = ordered_shard()
    shard.apply(schedule("m2", 200, key="k"))
    prepared = admission(shard, "m2", "a2", earliest=200)
    shard.apply(schedule("m1", 150, key="k"), broker_ms=200)
    assert shard.result(prepared, broker_ms=200).reason == Reason.NOT_ORDERED_HEAD
    assert admit(shard, "m1", "a1", 201).status == ResultStatus.APPLIED


def test_cancel_reschedule_and_other_keys_move_the_head() -> None:
    """Cancelling the head makes the next message of the key the head; rescheduling it
    later does too; another key and an unkeyed message are never held."""
    shard = ordered_shard()
    for mid, at in (("m1", 100), ("m2", 200), ("m3", 300)):
        shard.apply(schedule(mid, at, key="k"))
    shard.apply(schedule("other", 400, key="j"))
    shard.apply(schedule("free", 400))
    assert admit(shard, "m2", "a2", 400).reason == Reason.NOT_ORDERED_HEAD
    assert admit(shard, "other", "ao", 400).status == ResultStatus.APPLIED
    assert admit(shard, "free", "af", 400).status == ResultStatus.APPLIED
    shard.apply(cancel("m1"))
    shard.apply(reschedule("m2", 350))
    assert admit(shard, "m2", "a2b", 400).reason == Reason.NOT_ORDERED_HEAD
    assert admit(shard, "m3", "a3", 400).status == ResultStatus.APPLIED


def test_equal_deliver_at_goes_in_source_order() -> None:
    """Two messages of a key due at the same time: the one scheduled first is the head,
    whatever their ids."""
    shard = ordered_shard()
    shard.apply(schedule("zz", 100, key="k"))
    shard.apply(schedule("aa", 100, key="k"))
    assert admit(shard, "aa", "a1", 100).reason == Reason.NOT_ORDERED_HEAD
    assert admit(shard, "zz", "a2", 100).status == ResultStatus.APPLIED


def test_an_unordered_lane_keeps_no_order_entries() -> None:
    """Keyed messages of a lane that is not ORDERED write nothing to the order family."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 100, key="k"))
    shard.apply(schedule("m2", 50, key="k"))
    assert admit(shard, "m1", "a1", 100).status == ResultStatus.APPLIED
    assert shard.keys_with_prefix(keys.ORDER) == []


def test_finished_messages_leave_no_order_entry() -> None:
    """Published, cancelled, expired and failed messages have no entry left."""
    shard = ordered_shard()
    for mid in ("p", "c", "f"):
        shard.apply(schedule(mid, 100, key=mid))
    admit(shard, "p", "ap", 100)
    shard.apply(outcome("p", "ap", Outcome.PUBLISHED), broker_ms=100)
    shard.apply(cancel("c"))
    admit(shard, "f", "af", 100)
    shard.apply(outcome("f", "af", Outcome.NOT_PUBLISHED, Disposition.PERMANENT),
                broker_ms=100)
    assert shard.keys_with_prefix(keys.ORDER) == []


EVENTS = st.lists(st.tuples(st.sampled_from(["schedule", "admit", "fail", "publish", "cancel",
                                             "unknown", "resolve"]),
                            st.integers(0, 5), st.integers(0, 3)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(EVENTS)
def test_only_the_keys_first_unfinished_message_is_ever_admitted(events: list[tuple[
        str, int, int]]) -> None:
    """Any history of schedules, admissions, failures, publishes, cancels and uncertain
    attempts: an admission is APPLIED only for the message whose (deliverAt, schedule
    position) is least among its key's SCHEDULED messages, with none of the key in flight;
    and the order entries are exactly the key's unfinished messages."""
    shard = ordered_shard()
    now = 1_000
    for n, (kind, index, delivery) in enumerate(events):
        mid, now = f"m{index}", now + 10
        message = shard.message(mid)
        if kind == "schedule" and message is None:
            shard.apply(schedule(mid, 1_000 + delivery * 100, key="k"), broker_ms=now)
        elif kind == "admit" and message is not None and message.state == MessageState.SCHEDULED:
            expected = _expected_head(shard)
            at = max(now, message.action_at_ms)
            result = shard.result(admission(shard, mid, f"a{n}", earliest=at), broker_ms=at)
            assert (result.status == ResultStatus.APPLIED) == (expected == mid), \
                (mid, expected, result)
        elif message is not None and message.open_attempt_id is not None:
            _settle(shard, kind, message.delay_message_id, message.open_attempt_id, n, now)
        elif kind == "cancel" and message is not None:
            shard.apply(cancel(mid, cmd=f"c{n}"), broker_ms=now)
    unfinished = [m for m in (shard.message(f"m{i}") for i in range(6))
                  if m is not None and m.state in (MessageState.SCHEDULED,
                                                   MessageState.PUBLISHING,
                                                   MessageState.UNCERTAIN)]
    assert len(shard.keys_with_prefix(keys.ORDER)) == len(unfinished)


def _expected_head(shard: MemoryShard) -> str | None:
    messages = [m for m in (shard.message(f"m{i}") for i in range(6)) if m is not None]
    if any(m.state in (MessageState.PUBLISHING, MessageState.UNCERTAIN) for m in messages):
        return None
    waiting = [m for m in messages if m.state == MessageState.SCHEDULED]
    if not waiting:
        return None
    return min(waiting, key=lambda m: (m.deliver_at_ms, m.created_position)).delay_message_id


def _settle(shard: MemoryShard, kind: str, mid: str, attempt: str, n: int, now: int) -> None:
    if kind == "fail":
        shard.apply(outcome(mid, attempt, Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                            oid=f"o{n}"), broker_ms=now)
    elif kind == "publish":
        shard.apply(outcome(mid, attempt, Outcome.PUBLISHED, oid=f"o{n}"), broker_ms=now)
    elif kind == "unknown":
        shard.apply(outcome(mid, attempt, Outcome.UNKNOWN, oid=f"o{n}"), broker_ms=now)
    elif kind == "resolve":
        shard.apply(r.AttemptResolve(attempt_id=attempt,
                                     resolution=r.Resolution.NOT_PUBLISHED, evidence="absent",
                                     **op(f"res{n}")), broker_ms=now)
