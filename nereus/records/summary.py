"""One-line summaries and identifiers of records, for ``nereus shard log`` (the audit trail).

Operator mutations name who did what and why; system mutations name the attempt and the
owner; client commands name the message. ``LogEntry`` is one line of ``shard log --json``.
"""

from __future__ import annotations

import msgspec

from nereus.records import client, operator, system
from nereus.records.batch import records_in
from nereus.records.codec import (
    OPERATOR_MUTATIONS,
    SYSTEM_MUTATIONS,
    ClientCommand,
    DecodeFailure,
    OperatorMutation,
    Record,
    SystemMutation,
    decode,
    kind_of,
)
from nereus.timespec import format_time_ms


class LogEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One Shard Log record as the audit trail shows it: where and when, its kind, its
    identifiers and a one-line summary. A record that does not decode is kind
    ``UNDECODABLE``, its summary the reason, and only it carries ``size_bytes``."""

    position: int
    broker_time: str  # broker_ms as UTC text
    broker_ms: int
    kind: str
    ids: dict[str, str]
    summary: str
    size_bytes: int | msgspec.UnsetType = msgspec.UNSET
    # a PUBLISH_BATCH's member: its index in the batch at ``position`` (one line each)
    member: int | msgspec.UnsetType = msgspec.UNSET


def log_entries(position: int, broker_ms: int, payload: bytes) -> list[LogEntry]:
    """The audit-trail lines of the record ``payload`` read at ``position``: one, or one
    per member of a PUBLISH_BATCH, each as the record it carries, with its index."""
    members = records_in(payload)
    if len(members) == 1:
        return [log_entry(position, broker_ms, payload)]
    return [msgspec.structs.replace(log_entry(position, broker_ms, data), member=index)
            for index, data in enumerate(members)]


def log_entry(position: int, broker_ms: int, payload: bytes) -> LogEntry:
    """The audit-trail line of the record ``payload`` read at ``position``."""
    decoded = decode(payload)
    broker_time = format_time_ms(broker_ms)
    if isinstance(decoded, DecodeFailure):
        where = f" at byte {decoded.at_byte}" if decoded.at_byte is not None else (
            f" at {decoded.field}" if decoded.field else "")
        return LogEntry(position=position, broker_time=broker_time, broker_ms=broker_ms,
                        kind="UNDECODABLE", ids={},
                        summary=f"{decoded.reason}{where}: {decoded.detail}",
                        size_bytes=len(payload))
    return LogEntry(position=position, broker_time=broker_time, broker_ms=broker_ms,
                    kind=kind_of(decoded), ids=record_ids(decoded), summary=summarize(decoded))


def record_ids(record: Record) -> dict[str, str]:
    """The record's identifiers that are set (command_id, delay_message_id, lane...)."""
    ids: dict[str, str] = {}
    for field in ("command_id", "delay_message_id", "attempt_id", "outcome_id", "mutation_id",
                  "barrier_id", "payload_id", "checkpoint_id", "lane", "idempotency_key",
                  "operator", "reason"):
        value = getattr(record, field, None)
        if value not in (None, ""):
            ids[field] = value
    return ids


def summarize(record: Record) -> str:
    """One line saying what the record does (and, for an operator mutation, who and why)."""
    if isinstance(record, system.PublishBatch):  # shown member by member (``log_entries``)
        return f"{len(record.members)} admissions and outcomes of one turn"
    if isinstance(record, OPERATOR_MUTATIONS):
        return (f"{_operator_target(record)} by {record.operator or '?'}: "
                f"{record.reason or '(no reason)'}")
    if isinstance(record, SYSTEM_MUTATIONS):
        return _system_summary(record)
    return _client_summary(record)


def _client_summary(record: ClientCommand) -> str:
    """The message a client command is about, and what it asks."""
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


def _system_summary(record: SystemMutation) -> str:
    """The attempt, owner or position a system mutation records."""
    match record:
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
        case system.Sweep():
            return (f"sweep {len(record.entries)} retained items owner={record.owner_id} "
                    f"epoch={record.fencing_epoch}")
        case system.RetainBackfill():
            stages = (f" and {len(record.payload_ids)} payload stages"
                      if isinstance(record.payload_ids, tuple) else "")
            if isinstance(record.result_keys, tuple):
                stages += f" and {len(record.result_keys)} results"
            if isinstance(record.reject_positions, tuple):
                stages += f" and {len(record.reject_positions)} rejects"
            return (f"catch up retention of {len(record.delay_message_ids)} messages{stages} "
                    f"owner={record.owner_id} epoch={record.fencing_epoch}")


def _operator_target(record: OperatorMutation) -> str:
    """What an operator mutation changes (who and why are added by ``summarize``)."""
    match record:
        case operator.LaneGate():
            target = f"lane {record.lane} gate {record.gate}"
        case operator.LaneConfig():
            changes = {k: getattr(record, k) for k in ("capacity", "quota", "retry_max",
                                                        "retry_backoff_ms", "unavailable_max",
                                                        "ordered", "handoff_lead_ms")
                       if getattr(record, k) is not None}
            target = f"lane {record.lane} " + " ".join(f"{k}={v}" for k, v in changes.items())
        case operator.LaneLimits():
            target = (f"lane {record.lane} max_delay_ms={record.max_delay_ms or 'none'} "
                      f"max_pending={record.max_pending or 'none'}" + "".join(
                          f" {name}={value}" for name in ("retention_ms", "dedup_window_ms",
                                                          "catch_up", "catch_up_kept")
                          if (value := getattr(record, name)) is not msgspec.UNSET))
        case operator.AttemptResolve():
            target = f"attempt {record.attempt_id} {record.resolution} ({record.evidence})"
        case operator.MessageBreak():
            target = f"break {record.delay_message_id}"
        case operator.ShardPause():
            target = "pause shard"
        case operator.ShardResume():
            target = "resume shard"
        case operator.ShardLimits():
            target = "shard limits " + " ".join(
                f"{name}={value}" for name, value in msgspec.structs.asdict(
                    record.limits).items())
        case operator.ShardRetention():
            target = f"shard dedup_window_ms={record.dedup_window_ms or 'kept'}" + (
                " catch_up=True" if record.catch_up is True else "")
    return target
