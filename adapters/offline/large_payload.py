"""Scheduling a message whose payload is too large to ride inline, for the CLI and for
library users alike.

All on the message's shard, in this order: PAYLOAD_RESERVE (size, SHA-256, an expiry), the
upload to the object store, the attestation (the stored object's size and SHA-256 must be
the reserved ones), PAYLOAD_COMMIT, then the SCHEDULE naming the payload (``payload_ref``)
with an empty inline payload. The reservation is queued before the upload so an object in
``payloads/`` always has a stage in some log: ``nereus payload gc`` relies on that. A run
that stops half-way leaves a reservation that expires and an object that gc collects.

Commands go through a ``CommandSink`` (the engine, or straight to the logs), the bytes
through an ``ObjectStore``; time, ids and progress reporting are given, so the flow itself
reads no clock and draws no randomness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import msgspec

from nereus.adapters.backends.objectstore.protocol import ObjectStore
from nereus.client import (
    CommandSink,
    Prepared,
    Receipt,
    RouteRef,
    prepare_payload_commit,
    prepare_payload_reserve,
    prepare_schedule,
)
from nereus.client.validate import ScheduleFields
from nereus.errors import NereusError, UsageError
from nereus.payload_objects import object_key as payload_object_key

RESERVATION_TTL_MS: Final = 3_600_000  # an abandoned reservation expires after this
_READ: Final = 1 << 20


class Progress(Protocol):
    """Reports progress of one long step: ``with progress(what, total) as advance:``."""

    def __call__(self, description: str, total: int | None) -> AbstractContextManager[
            Callable[[int], None]]: ...


@contextmanager
def no_progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A ``Progress`` that reports nothing."""
    yield lambda _n: None


class LargePayloadReceipt(Receipt, frozen=True, kw_only=True):
    """The SCHEDULE's receipt, and the payload it references: its id, size, SHA-256 and
    object key, and the receipts of its PAYLOAD_RESERVE and PAYLOAD_COMMIT stages (what
    ``message schedule --payload-file`` prints on the large-payload path)."""

    payload_id: str
    payload_bytes: int
    payload_sha256: str
    payload_object: str
    payload_stages: list[Receipt]


@dataclass(frozen=True, slots=True)
class LargePayload:
    """What was done: the payload's identity, the two stages' receipts, the SCHEDULE's."""

    payload_id: str
    size: int
    sha256: str
    object_key: str
    stages: tuple[Receipt, ...]
    schedule: Receipt

    def receipt(self) -> LargePayloadReceipt:
        """The SCHEDULE's receipt with the payload's identity and stages."""
        return LargePayloadReceipt(
            **msgspec.structs.asdict(self.schedule), payload_id=self.payload_id,
            payload_bytes=self.size, payload_sha256=self.sha256,
            payload_object=self.object_key, payload_stages=list(self.stages))


@dataclass(frozen=True, slots=True, kw_only=True)
class LargeMessage(ScheduleFields):
    """The message to schedule, its payload in the file at ``path``."""

    path: Path


def hash_file(path: Path, size_hint: int | None,
              progress: Progress = no_progress) -> tuple[int, str]:
    """Size and SHA-256 of ``path``, streamed."""
    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as handle, progress("hashing", size_hint) as advance:
            while chunk := handle.read(_READ):
                digest.update(chunk)
                size += len(chunk)
                advance(len(chunk))
    except OSError as exc:
        raise UsageError(f"payload file {path}: {exc.strerror}") from None
    return size, digest.hexdigest()


def schedule_large_payload(
    sink: CommandSink, objects: ObjectStore, route: RouteRef, message: LargeMessage, *,
    max_payload_bytes: int, now_ms: int, new_id: Callable[[], str], wait: bool,
    progress: Progress = no_progress,
) -> LargePayload:
    """RESERVE -> upload -> attest -> COMMIT -> SCHEDULE(payload_ref), all on one shard.

    A REJECTED stage, a payload over ``max_payload_bytes`` or a failed attestation raises a
    ``NereusError`` naming what was left behind (gc collects it)."""
    try:
        size_hint: int | None = message.path.stat().st_size
    except OSError as exc:
        raise UsageError(f"payload file {message.path}: {exc.strerror}") from None
    if size_hint is not None and size_hint > max_payload_bytes:
        raise _too_large(size_hint, max_payload_bytes)
    size, sha256 = hash_file(message.path, size_hint, progress)
    if size > max_payload_bytes:
        raise _too_large(size, max_payload_bytes)
    shard = route.placement(message.delay_message_id, message.lane, message.key)
    payload_id = new_id().replace("-", "")
    object_key = payload_object_key(shard.route, shard.partition, payload_id)
    leftover = (f"the object {object_key} (if uploaded) is collected by `nereus payload gc` "
                "once the reservation expires")
    reserve = prepare_payload_reserve(
        route, command_id=new_id(), delay_message_id=message.delay_message_id,
        payload_id=payload_id, size_bytes=size, sha256=sha256,
        expires_at_ms=now_ms + RESERVATION_TTL_MS, shard=shard)
    stages = [_stage(sink, reserve, wait, payload_id)]
    with progress(f"uploading {object_key}", size) as advance:
        uploaded = objects.put_file(object_key, message.path)
        advance(uploaded.size)
    attested = objects.head(object_key)
    if attested is None or (attested.size, attested.sha256) != (size, sha256):
        found = ("no object" if attested is None else
                 f"{attested.size} bytes, sha256 {attested.sha256 or 'unknown'}")
        raise NereusError(
            f"attestation of {object_key} in {objects.description} failed: reserved {size} "
            f"bytes sha256 {sha256}, the store holds {found}; PAYLOAD_COMMIT was not queued",
            hint=f"did {message.path} change during the upload? {leftover}")
    commit = prepare_payload_commit(
        route, command_id=new_id(), delay_message_id=message.delay_message_id,
        payload_id=payload_id, size_bytes=size, sha256=sha256, object_key=object_key,
        shard=shard)
    stages.append(_stage(sink, commit, wait, payload_id, hint=leftover))
    scheduled = prepare_schedule(
        route, command_id=new_id(), delay_message_id=message.delay_message_id,
        lane=message.lane, deliver_at_ms=message.deliver_at_ms,
        expire_at_ms=message.expire_at_ms, key=message.key, headers=message.headers,
        payload=b"", payload_ref=payload_id)
    (receipt,) = sink.submit([scheduled], wait=wait)
    return LargePayload(payload_id, size, sha256, object_key, tuple(stages), receipt)


def _stage(sink: CommandSink, prepared: Prepared, wait: bool, payload_id: str, *,
           hint: str | None = None) -> Receipt:
    """Submit one stage; a REJECTED stage stops the flow."""
    (receipt,) = sink.submit([prepared], wait=wait)
    if receipt.result == "REJECTED":
        raise NereusError(
            f"{prepared.kind} of payload {payload_id} was REJECTED on shard {receipt.shard} "
            f"at position {receipt.source_position}: {receipt.reason}: {receipt.detail}",
            hint=hint)
    return receipt


def _too_large(size: int, limit: int) -> UsageError:
    return UsageError(f"the payload is {size} bytes, over the large-payload limit of {limit} "
                      "(shard.max_payload_bytes)")
