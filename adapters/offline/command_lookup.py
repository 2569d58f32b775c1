"""Where a command stands, found by its id at any later time (``nereus command show``).

A command is APPLIED when its shard holds a result under its dedup key (``c/<commandId>``
for client commands, ``m/<idempotencyKey>`` for operator mutations); QUEUED when the
Shard Log holds it past the applied position; otherwise this shard never saw it. The same
lookup serves the engine (live stores) and offline tools (read-only stores), so the
answer does not depend on whether the engine runs.
"""

from __future__ import annotations

import msgspec

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.machine import dedup_key
from nereus.records import decode
from nereus.records.codec import DecodeFailure
from nereus.state import keys
from nereus.state.values import Result, decode_value
from nereus.state.view import StateView
from nereus.timespec import format_time_ms

_READ = 1_000


def applied_result(view: StateView, command_id: str) -> Result | None:
    """The result the shard keeps for this command id (client command or mutation)."""
    for prefix in ("c/", "m/"):
        raw = view.get(keys.result_key(prefix + command_id))
        if raw is not None:
            return decode_value(raw, Result)
    return None


def queued_position(log: ShardLog, start: int, command_id: str) -> tuple[int, int] | None:
    """(position, broker ms) of the first record at or past ``start`` whose dedup key is
    this command id's, or None. Reads only the part of the log not applied yet."""
    wanted = {"c/" + command_id, "m/" + command_id}
    position = start
    while True:
        records = log.read(position, _READ)
        if not records:
            return None
        for record in records:
            decoded = decode(record.payload)
            if not isinstance(decoded, DecodeFailure) and dedup_key(decoded) in wanted:
                return record.position, record.broker_ms
        position = records[-1].position + 1


class CommandStatus(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where one command stands (the ``command show`` document): APPLIED with the shard's
    result, or QUEUED in the Shard Log past the applied position (no result yet)."""

    command_id: str
    shard: str
    evidence: str  # APPLIED | QUEUED
    kind: str | None
    source_position: int
    broker_time: str | None
    result: str | None
    reason: str | None
    detail: str | None
    delay_message_id: str | None
    generation: int | None
    attempt_id: str | None


def command_view(command_id: str, shard: str, result: Result | None,
                 queued: tuple[int, int] | None) -> CommandStatus:
    """The ``command show`` document for one shard's answer."""
    if result is not None:
        return CommandStatus(
            command_id=command_id, shard=shard, evidence="APPLIED", kind=result.kind,
            source_position=result.position, broker_time=None, result=result.status.value,
            reason=result.reason, detail=result.detail,
            delay_message_id=result.delay_message_id, generation=result.generation,
            attempt_id=result.attempt_id)
    assert queued is not None
    return CommandStatus(
        command_id=command_id, shard=shard, evidence="QUEUED", kind=None,
        source_position=queued[0], broker_time=format_time_ms(queued[1]), result=None,
        reason=None, detail=None, delay_message_id=None, generation=None, attempt_id=None)
