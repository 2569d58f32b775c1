"""Prepare: fix route, partition, ids and canonical bytes before any I/O.

A ``Prepared`` command is immutable. Retrying after a timeout reuses the same object
(same commandId, same bytes), so the shard's deduplication turns a duplicate delivery
into the first result again instead of a second message. Identifiers are passed in:
the core draws no randomness.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgspec

from nereus.records import (
    Cancel,
    PayloadCommit,
    PayloadReserve,
    Record,
    Reschedule,
    Schedule,
    encode,
    kind_of,
)
from nereus.shard import ShardId, partition_for


@dataclass(frozen=True, slots=True)
class RouteRef:
    """What a client needs to know about a route: its name, its partition count, and which
    lanes are ORDERED (their keyed messages are placed by key); ``route_id`` from its
    identity record when learned from the route (``DelayClient`` never builds one by hand)."""

    name: str
    partitions: int
    ordered_lanes: frozenset[str] = frozenset()
    route_id: str = ""

    def shard_for(self, delay_message_id: str) -> ShardId:
        """The shard a message id hashes to (where every unordered message lives)."""
        return ShardId(self.name, partition_for(delay_message_id, self.partitions))

    def placement(self, delay_message_id: str, lane: str, key: str | None) -> ShardId:
        """Where a new message lives: a keyed message of an ORDERED lane on its key's shard
        (one key, one shard: per-key order holds across the route), any other by its id."""
        if key is not None and lane in self.ordered_lanes:
            return ShardId(self.name, partition_for(key, self.partitions))
        return self.shard_for(delay_message_id)


@dataclass(frozen=True, slots=True)
class Prepared:
    """One command, ready to queue: its shard and exact bytes are fixed."""

    shard: ShardId
    kind: str
    command_id: str
    delay_message_id: str | None
    data: bytes
    record: Record


def content_command_id(route: RouteRef, record: Schedule) -> str:
    """A SCHEDULE's command id derived from everything it says (route, message id, lane,
    times, key, headers, payload): the same schedule prepared twice — a script's retry after
    a timeout, a re-run batch — is the same command, so the shard applies it once and
    answers the retry with the first result; any difference is a new command (and, for
    the same message id, REJECTED ``MESSAGE_EXISTS``)."""
    data = encode(msgspec.structs.replace(record, command_id=""))
    digest = hashlib.blake2b(route.name.encode() + b"\0" + data, digest_size=16).hexdigest()
    return f"sched-{digest}"


def _prepared(shard: ShardId, record: Record, command_id: str, delay_id: str | None) -> Prepared:
    return Prepared(shard, kind_of(record), command_id, delay_id, encode(record), record)


def prepare_schedule(
    route: RouteRef,
    *,
    command_id: str | None = None,
    delay_message_id: str,
    lane: str,
    deliver_at_ms: int,
    action_at_ms: int | None = None,
    expire_at_ms: int | None = None,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    payload: bytes = b"",
    payload_ref: str | None = None,
) -> Prepared:
    record = Schedule(
        command_id=command_id or "", delay_message_id=delay_message_id, lane=lane,
        deliver_at_ms=deliver_at_ms, action_at_ms=action_at_ms,
        expire_at_ms=expire_at_ms, key=key, headers=dict(headers or {}), payload=payload,
        payload_ref=payload_ref,
    )
    if command_id is None:  # derived from the content: an identical retry is one command
        command_id = content_command_id(route, record)
        record = msgspec.structs.replace(record, command_id=command_id)
    return _prepared(route.placement(delay_message_id, lane, key), record, command_id,
                     delay_message_id)


def prepare_cancel(route: RouteRef, *, command_id: str, delay_message_id: str,
                   shard: ShardId | None = None) -> Prepared:
    """CANCEL on ``shard``: the message's shard (its id's unless it was placed by key)."""
    record = Cancel(command_id=command_id, delay_message_id=delay_message_id)
    return _prepared(shard or route.shard_for(delay_message_id), record, command_id,
                     delay_message_id)


def prepare_reschedule(
    route: RouteRef,
    *,
    command_id: str,
    delay_message_id: str,
    deliver_at_ms: int,
    action_at_ms: int | None = None,
    expire_at_ms: int | None = None,
    shard: ShardId | None = None,
) -> Prepared:
    """RESCHEDULE on ``shard`` (as for ``prepare_cancel``)."""
    record = Reschedule(
        command_id=command_id, delay_message_id=delay_message_id, deliver_at_ms=deliver_at_ms,
        action_at_ms=action_at_ms, expire_at_ms=expire_at_ms,
    )
    return _prepared(shard or route.shard_for(delay_message_id), record, command_id,
                     delay_message_id)


def prepare_payload_reserve(
    route: RouteRef,
    *,
    command_id: str,
    delay_message_id: str,
    payload_id: str,
    size_bytes: int,
    sha256: str,
    expires_at_ms: int,
    shard: ShardId | None = None,
) -> Prepared:
    """PAYLOAD_RESERVE on the shard of the message that will reference the payload.

    ``delay_message_id`` (or ``shard``: the message's ``placement``) only picks the shard:
    a SCHEDULE can reference a payload committed on its own shard alone, so every stage of
    the large-payload path goes there.
    """
    record = PayloadReserve(
        command_id=command_id, payload_id=payload_id, size_bytes=size_bytes, sha256=sha256,
        expires_at_ms=expires_at_ms,
    )
    return _prepared(shard or route.shard_for(delay_message_id), record, command_id,
                     delay_message_id)


def prepare_payload_commit(
    route: RouteRef,
    *,
    command_id: str,
    delay_message_id: str,
    payload_id: str,
    size_bytes: int,
    sha256: str,
    object_key: str,
    shard: ShardId | None = None,
) -> Prepared:
    """PAYLOAD_COMMIT of an uploaded and attested payload (same shard as its reservation)."""
    record = PayloadCommit(
        command_id=command_id, payload_id=payload_id, size_bytes=size_bytes, sha256=sha256,
        object_key=object_key,
    )
    return _prepared(shard or route.shard_for(delay_message_id), record, command_id,
                     delay_message_id)
