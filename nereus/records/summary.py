"""One-line summaries and identifiers of records, for ``nereus shard log`` (the audit trail).

Operator mutations name who did what and why; system mutations name the attempt and the
owner; client commands name the message.
"""

from __future__ import annotations

from typing import Any

from nereus.records import client, operator, system
from nereus.records.codec import Record
from nereus.timespec import format_time_ms


def record_ids(record: Record) -> dict[str, Any]:
    ids: dict[str, Any] = {}
    for field in ("command_id", "delay_message_id", "attempt_id", "outcome_id", "mutation_id",
                  "barrier_id", "payload_id", "checkpoint_id", "lane", "idempotency_key",
                  "operator", "reason"):
        value = getattr(record, field, None)
        if value not in (None, ""):
            ids[field] = value
    return ids


def summarize(record: Record) -> str:
    match record:
        case client.Schedule():
            extra = f" expire_at={format_time_ms(record.expire_at_ms)}" if record.expire_at_ms \
                is not None else ""
            size = f"ref {record.payload_ref}" if record.payload_ref else f"{len(record.payload)}B"
            return (f"{record.delay_message_id} lane={record.lane} deliver_at="
                    f"{format_time_ms(record.deliver_at_ms)}{extra} key={record.key} "
                    f"payload={size}")
        case client.Cancel():
            return record.delay_message_id
        case client.Reschedule():
            return f"{record.delay_message_id} deliver_at={format_time_ms(record.deliver_at_ms)}"
        case client.QueryBarrier():
            return "query barrier"
        case client.PayloadReserve() | client.PayloadCommit():
            return f"payload {record.payload_id} {record.size_bytes}B sha256={record.sha256[:12]}.."
        case system.PublishAdmission():
            return (f"{record.delay_message_id} attempt={record.attempt_id} "
                    f"gen={record.generation} owner={record.owner_id} epoch={record.fencing_epoch}")
        case system.PublishOutcome():
            disposition = "" if record.disposition == "NONE" else f"/{record.disposition}"
            return (f"{record.delay_message_id} attempt={record.attempt_id} "
                    f"{record.outcome}{disposition} evidence={record.evidence!r}")
        case system.ClaimResult():
            return f"{record.delay_message_id} {record.disposition} {record.detail}"
        case system.ActivationBarrier():
            return f"owner {record.owner_id} epoch {record.fencing_epoch}"
        case system.RouteIdentity():
            return (f"route {record.route} id {record.route_id or '-'} partition "
                    f"{record.partition} of {record.partitions}")
        case system.CheckpointMark():
            return f"checkpoint {record.checkpoint_id}"
        case operator.LaneGate():
            target = f"lane {record.lane} gate {record.gate}"
        case operator.LaneConfig():
            changes = {k: getattr(record, k) for k in ("capacity", "quota", "retry_max",
                                                        "retry_backoff_ms", "unavailable_max",
                                                        "ordered", "handoff_lead_ms")
                       if getattr(record, k) is not None}
            target = f"lane {record.lane} " + " ".join(f"{k}={v}" for k, v in changes.items())
        case operator.AttemptResolve():
            target = f"attempt {record.attempt_id} {record.resolution} ({record.evidence})"
        case operator.MessageBreak():
            target = f"break {record.delay_message_id}"
        case operator.ShardPause():
            target = "pause shard"
        case operator.ShardResume():
            target = "resume shard"
    return f"{target} by {record.operator or '?'}: {record.reason or '(no reason)'}"
