"""A large payload through ``DelayClient.schedule``: the CLI's flow
(``nereus.adapters.offline.large_payload``: reserve, upload, attest, commit, schedule on
the message's shard), its commands sent through the client's sender and retry policy, its
bytes to the route's object store."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from nereus.adapters.backends.objectstore.factory import open_object_store
from nereus.adapters.client.route_source import RouteSource
from nereus.adapters.offline.large_payload import LargeMessage, schedule_large_payload
from nereus.client.prepare import Prepared
from nereus.client.receipt import Receipt
from nereus.client.validate import ScheduleFields


class Queues(Protocol):
    def queue_many(self, prepared: Sequence[Prepared]) -> list[Receipt]: ...


class _ClientSink:
    """The client's sender as a ``CommandSink`` (QUEUED receipts only)."""

    def __init__(self, client: Queues) -> None:
        self._client = client

    def submit(self, prepared: Sequence[Prepared], *, wait: bool) -> list[Receipt]:
        return self._client.queue_many(prepared)


def schedule_large(source: RouteSource, client: Queues, fields: ScheduleFields, path: Path,
                   now_ms: int) -> Receipt:
    """Schedule ``fields``' message with the payload in ``path`` by reference; the
    SCHEDULE's receipt, naming the payload and its stages (``LargePayloadReceipt``)."""
    objects = open_object_store(source.config.objects, source.home or Path("."))
    done = schedule_large_payload(
        _ClientSink(client), objects, source.ref(),
        LargeMessage(path=path, **{f.name: getattr(fields, f.name)
                                   for f in dataclasses.fields(ScheduleFields)}),
        max_payload_bytes=source.limits.max_payload_bytes, now_ms=now_ms,
        new_id=lambda: str(uuid.uuid4()), wait=False)
    return done.receipt()
