"""One message explained on its shard (``nereus message explain``): the loop's scheduling
state, the lane gate's last change read back from the Shard Log (who, when, why), and the
scheduler's gates for the message (``scheduler/explain.py``)."""

from __future__ import annotations

import msgspec

from nereus.adapters.admin.wire import MessageExplanation
from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.engine.scheduler.explanation import explanation
from nereus.engine.shard.admissions import AdmissionFlow
from nereus.records import LaneGate, decode
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt, Lane, Message, decode_value
from nereus.timespec import format_time_ms
from nereus.views import find_message, message_not_found


def explain_message(store: ShardStore, log: ShardLog, shard: str, flow: AdmissionFlow,
                    delay_message_id: str, *, shard_hold: str | None) -> MessageExplanation:
    message = find_message(store, delay_message_id)
    if message is None:
        raise message_not_found(delay_message_id, shard, store.applied_position())
    lane = flow.lanes().get(message.lane, Lane(name=message.lane))
    inputs = flow.explain_inputs(message, shard_hold=shard_hold,
                                 gate_detail=gate_change(log, lane))
    return msgspec.structs.replace(explanation(inputs, message, shard),
                                   attempts=attempt_lines(store, message))


def attempt_lines(store: ShardStore, message: Message) -> list[str]:
    """Each attempt of ``message`` in order: its id, state and evidence."""
    lines = []
    for attempt_no in range(1, message.attempts + 1):
        raw_id = store.get(keys.msg_attempt_key(message.delay_message_id, attempt_no))
        raw = None if raw_id is None else store.get(keys.attempt_key(raw_id.decode()))
        if raw is not None:
            attempt = decode_value(raw, Attempt)
            lines.append(f"{attempt.attempt_id} {attempt.state}: {attempt.evidence or '-'}")
    return lines


def gate_change(log: ShardLog, lane: Lane) -> str:
    """Who set the lane's admissionGate, when and why: its LANE_GATE record in the log."""
    position = lane.gate_position
    if position is None:
        return "never changed"
    try:
        found = log.read(position, 1)
    except Exception as exc:  # a log that cannot be read must not hide the rest
        return f"set at position {position} (the record could not be read: {exc})"
    record = decode(found[0].payload) if found and found[0].position == position else None
    if not isinstance(record, LaneGate):
        return f"set at position {position} (no LANE_GATE record there any more)"
    return (f"set by {record.operator} at {format_time_ms(found[0].broker_ms)} (position "
            f"{position}): {record.reason}")
