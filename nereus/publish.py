"""The immutable prepared publish template a Claim materialises.

It holds everything the destination adapter needs (payload, key, headers, times) and
nothing it may change. Its digest travels in PUBLISH_ADMISSION (``prepared_digest``), so
the attempt in the ledger names exactly what was to be sent.
"""

from __future__ import annotations

import hashlib

import msgspec


class PublishTemplate(msgspec.Struct, frozen=True, kw_only=True):
    delay_message_id: str
    generation: int
    lane: str
    deliver_at_ms: int
    action_at_ms: int
    key: str | None
    headers: dict[str, str]
    payload: bytes


_encoder = msgspec.msgpack.Encoder(order="deterministic")


def template_digest(template: PublishTemplate) -> str:
    return hashlib.sha256(_encoder.encode(template)).hexdigest()
