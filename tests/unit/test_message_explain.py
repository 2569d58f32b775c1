"""``message explain``'s gates (``engine/scheduler/explanation.py``): for each gate a message
held by it alone names it first, with the planner's own checks (``gates.py``), and an
ORDERED lane's holder is named from the store (``ordered_blocker.py``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from nereus.engine.scheduler.explanation import ExplainInputs, explanation
from nereus.engine.scheduler.ordered_blocker import ordered_blocker
from nereus.records import AttemptState, Gate, MessageState
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Lane, Message, WorkRef, encode_value
from nereus.trusted_time import TrustedTime

NOW = TrustedTime(earliest_ms=1_800_000_000_000, latest_ms=1_800_000_000_020)


def _message(message_id: str = "m1", *, action_at_ms: int = NOW.earliest_ms - 1_000,
             expire_at_ms: int | None = None, key: str | None = None,
             state: MessageState = MessageState.SCHEDULED, payload: bytes = b"x") -> Message:
    return Message(delay_message_id=message_id, lane="local", state=state, generation=1,
                   deliver_at_ms=action_at_ms, action_at_ms=action_at_ms,
                   expire_at_ms=expire_at_ms, key=key, headers={}, payload=payload,
                   payload_ref=None, work_digest="w", retries=0, attempts=0,
                   open_attempt_id=None, schedule_command_id="c", created_position=1,
                   updated_position=1)


CLEAR = ExplainInputs(
    shard_hold=None, lane=Lane(name="local"), gate_detail="never changed", ready=True,
    not_ready_reason=None, now=NOW, clock_problem=None, clock_held_back=None, lead_ms=0,
    ordered_blocker=None,
    claims_on_lane=0, quota_left=None, permits_refusal=None, claimed=None, capability=None,
    waiting=None)


def test_a_message_nothing_holds_is_claimed_by_the_next_round() -> None:
    """Every gate open: none holds, and the answer says the next round claims it."""
    found = explanation(CLEAR, _message(), "default/0")
    assert found.held_by is None and not any(g.holds for g in found.gates)
    assert "next scheduling round" in found.why


@pytest.mark.parametrize(("changes", "message", "first"), [
    ({"shard_hold": "paused by an operator"}, _message(), "shard"),
    ({}, _message(state=MessageState.UNCERTAIN), "message"),
    ({"claimed": "a-1"}, _message(), "message"),
    ({"lane": Lane(name="local", gate=Gate.CLOSED)}, _message(), "lane_gate"),
    ({"ready": False, "not_ready_reason": "broker down"}, _message(), "readiness"),
    ({}, _message(action_at_ms=NOW.earliest_ms + 60_000), "trusted_time"),
    ({"now": None, "clock_problem": "no sync"}, _message(), "trusted_time"),
    ({}, _message(expire_at_ms=NOW.earliest_ms - 1), "expiry"),
    ({}, _message(expire_at_ms=NOW.earliest_ms + 5), "expiry"),  # inside the uncertainty
    ({"ordered_blocker": "ordered head: key 'k' has an earlier unsettled message"},
     _message(key="k"), "ordered_head"),
    ({"lane": Lane(name="local", quota=5), "quota_left": 0}, _message(), "quota"),
    ({"lane": Lane(name="local", capacity=2, open_attempts=2)}, _message(), "capacity"),
    ({"permits_refusal": "out of permits: 2000 of 2000 in flight"}, _message(), "permits"),
    ({"capability": "the record is 2000 bytes at the destination"}, _message(),
     "capability"),
])
def test_each_gate_alone_holds_the_message_first(changes: dict[str, Any],
                                                 message: Message, first: str) -> None:
    """Each gate alone holding a message is the one named first."""
    found = explanation(dataclasses.replace(CLEAR, **changes), message, "default/0")
    assert found.held_by == first
    holds = [g.gate for g in found.gates if g.holds]
    # an untrusted clock proves neither that actionAt came nor that expireAt did not
    assert holds == (["trusted_time", "expiry"] if changes.get("clock_problem") else [first])


def test_earlier_gates_come_first() -> None:
    """A closed lane on a paused shard for a message not yet due: the shard first."""
    inputs = dataclasses.replace(CLEAR, shard_hold="paused",
                                 lane=Lane(name="local", gate=Gate.CLOSED))
    found = explanation(inputs, _message(action_at_ms=NOW.earliest_ms + 1), "default/0")
    assert found.held_by == "shard"
    assert [g.gate for g in found.gates if g.holds] == ["shard", "lane_gate", "trusted_time"]


def test_the_holder_of_an_ordered_key_is_named(tmp_path: Path) -> None:
    """An open attempt of another message of the key names that message and attempt; with
    none, the first SCHEDULED message of the key's queue (the earliest deliverAt) is the
    head; other keys and an unordered lane hold nothing."""
    lane = Lane(name="local", ordered=True)
    later = _message("m2", key="k")
    with ShardStore.open(tmp_path / "db", create=True) as store:
        store.write({keys.attempt_key("a-1"): encode_value(Attempt(
            attempt_id="a-1", delay_message_id="m1", generation=1, attempt_no=1,
            lane="local", state=AttemptState.UNKNOWN, claim_id="c-1", owner_id="o",
            fencing_epoch=1, prepared_digest="p", admitted_position=3,
            admitted_broker_ms=NOW.earliest_ms))})
        held = ordered_blocker(store, lane, later, {}, {"a-1": ("local", "k")})
        assert held is not None and "m1" in held and "a-1" in held and "UNKNOWN" in held
        assert ordered_blocker(store, lane, _message("m3", key="other"), {},
                               {"a-1": ("local", "k")}) is None
        head = _message("m0", key="k", action_at_ms=later.action_at_ms - 10)
        store.write({keys.msg_key("m0"): encode_value(head),
                     keys.timeline_key("local", head.action_at_ms, "m0"):
                         encode_value(WorkRef(1, "PUBLISH", "w", 0)),
                     keys.order_key("local", "k", "m0", in_flight=False,
                                    deliver_at_ms=head.deliver_at_ms, created_position=1): b"",
                     keys.order_key("local", "k", "m2", in_flight=False,
                                    deliver_at_ms=later.deliver_at_ms, created_position=2): b""})
        assert "m0" in (ordered_blocker(store, lane, later, {}, {}) or "")
        assert ordered_blocker(store, lane, head, {}, {}) is None
        assert ordered_blocker(store, Lane(name="local"), later, {}, {}) is None
