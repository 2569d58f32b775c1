"""``nereus message explain``: every gate of seed 000 section 1, in the scheduler's order,
with its value for one message now, and the first that holds the message back.

The checks are the planner's own (``gates.py``, ``Permits.refusal``); this module only
lists them for one message instead of deciding a round. What it reads: the message, its
lane (gate, capacity, quota), the shard loop's state, the lane's readiness, Trusted UTC,
the live claims and open attempts (an ORDERED lane's key), and the permits in use. A
wait is not proof of anything (seed 000): it says why the message is not admitted now.
"""

from __future__ import annotations

from dataclasses import dataclass

from nereus.adapters.admin.wire import GateView, MessageExplanation
from nereus.engine.scheduler import gates
from nereus.records import MessageState
from nereus.state.values import Lane, Message
from nereus.timespec import format_time_ms
from nereus.trusted_time import TrustedTime


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplainInputs:
    """What the gates read, as the shard's scheduler has it now."""

    shard_hold: str | None  # the shard is not scheduling (state, pause, lease), or None
    lane: Lane
    gate_detail: str  # the lane gate's last change: who, when, why
    ready: bool
    not_ready_reason: str | None
    now: TrustedTime | None  # None: Trusted UTC is not trusted (``clock_problem``)
    clock_problem: str | None
    # why Trusted UTC is behind the wall clock (a step forwards, held back), or None
    clock_held_back: str | None
    lead_ms: int
    ordered_blocker: str | None  # on an ORDERED lane: what holds the key, or None
    claims_on_lane: int
    quota_left: int | None
    permits_refusal: str | None
    claimed: str | None  # this message's live claim (attempt id), or None
    capability: str | None  # why it can never be sent as it is (record size), or None
    waiting: str | None


def _state_hold(message: Message, claimed: str | None) -> str | None:
    if claimed is not None:
        return f"claimed: attempt {claimed} is being admitted or published"
    if message.state == MessageState.SCHEDULED:
        return None
    if message.state == MessageState.PUBLISHING:
        return "PUBLISHING: an attempt was admitted; its outcome is not applied yet"
    if message.state == MessageState.UNCERTAIN:
        return ("UNCERTAIN: an earlier attempt's outcome is unknown; evidence or an "
                "operator (`nereus attempt resolve`) settles it")
    return f"{message.state}: finished, nothing more is published"


def _time_gates(inputs: ExplainInputs, message: Message) -> list[GateView]:
    now = inputs.now
    if now is None:
        problem = f"Trusted UTC is not trusted: {inputs.clock_problem}"
        return [GateView(gate="trusted_time", holds=True, detail=problem),
                GateView(gate="expiry", holds=True, detail=problem)]
    early = gates.not_due(now, message, inputs.lead_ms, message.lane)
    if early is not None and inputs.clock_held_back is not None:
        early = f"{early}; {inputs.clock_held_back}"
    expiry = gates.expired(now, message) or gates.expiry_unproven(now, message)
    return [
        GateView(gate="trusted_time", holds=early is not None, detail=early or (
            f"due: Trusted UTC earliest {format_time_ms(now.earliest_ms)} is at or after "
            f"actionAt {format_time_ms(message.action_at_ms)}")),
        GateView(gate="expiry", holds=expiry is not None, detail=expiry or (
            "no expireAt" if message.expire_at_ms is None else
            f"open: Trusted UTC latest {format_time_ms(now.latest_ms)} is at or before "
            f"expireAt {format_time_ms(message.expire_at_ms)}")),
    ]


def gate_views(inputs: ExplainInputs, message: Message) -> list[GateView]:
    """Every gate in the scheduler's order, with its value for ``message``."""
    lane = inputs.lane
    state = _state_hold(message, inputs.claimed)
    admission = gates.admission_gate(lane)
    readiness = gates.readiness(inputs.ready)
    capacity = gates.capacity(lane, inputs.claims_on_lane)
    quota = gates.quota(lane, inputs.quota_left)
    views = [
        GateView(gate="shard", holds=inputs.shard_hold is not None,
                 detail=inputs.shard_hold or "ACTIVE: the shard schedules"),
        GateView(gate="message", holds=state is not None,
                 detail=state or "SCHEDULED: waits on the gates below"),
        GateView(gate="lane_gate", holds=admission is not None,
                 detail=f"{lane.gate}: {inputs.gate_detail}"),
        GateView(gate="readiness", holds=readiness is not None,
                 detail="READY" if readiness is None else
                 f"NOT READY: {inputs.not_ready_reason or 'the destination failed'}"),
        *_time_gates(inputs, message),
        GateView(gate="ordered_head", holds=inputs.ordered_blocker is not None,
                 detail=inputs.ordered_blocker or (
                     f"key {message.key!r} is at its head" if lane.ordered
                     else "the lane is not ORDERED")),
        GateView(gate="quota", holds=quota is not None,
                 detail=quota or ("no quota" if lane.quota is None else
                                  f"{inputs.quota_left} admission(s) left this second")),
        GateView(gate="capacity", holds=capacity is not None,
                 detail=capacity or ("no capacity limit" if lane.capacity is None else
                                     f"{lane.open_attempts + inputs.claims_on_lane} of "
                                     f"{lane.capacity} in flight")),
        GateView(gate="permits", holds=inputs.permits_refusal is not None,
                 detail=inputs.permits_refusal or "a permit is free"),
        GateView(gate="capability", holds=inputs.capability is not None,
                 detail=inputs.capability or "the destination takes it"),
    ]
    return views


def explanation(inputs: ExplainInputs, message: Message, shard: str) -> MessageExplanation:
    views = gate_views(inputs, message)
    first = next((view for view in views if view.holds), None)
    now = inputs.now
    return MessageExplanation(
        delay_message_id=message.delay_message_id, shard=shard, lane=message.lane,
        state=str(message.state), generation=message.generation,
        action_at=format_time_ms(message.action_at_ms),
        deliver_at=format_time_ms(message.deliver_at_ms),
        expire_at=None if message.expire_at_ms is None else format_time_ms(message.expire_at_ms),
        trusted_earliest=None if now is None else format_time_ms(now.earliest_ms),
        trusted_latest=None if now is None else format_time_ms(now.latest_ms),
        held_by=None if first is None else first.gate,
        why=(first.detail if first is not None else
             "nothing holds it: the next scheduling round claims it"),
        gates=views, scheduler_waiting=inputs.waiting)
