"""Limits the state machine enforces; they are inputs to apply, like the record bytes.

Replay must use the same limits as the live shard (they come from ``nereus.toml``'s
``[shard]`` table, or these defaults), otherwise a record near a limit could apply
differently. Raising a limit is safe for records already applied.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_inline_payload_bytes: int = 65_536
    max_payload_bytes: int = 1 << 30  # a large (object store) payload
    max_headers: int = 64
    max_header_bytes: int = 16_384  # all header names and values together
    max_id_bytes: int = 256
    # a time decision may lead the broker timestamp of its record by at most this: a
    # broker with its own clock (Kafka LogAppendTime) bounds how early a skewed engine
    # clock can make anything
    max_clock_ahead_ms: int = 1_000


DEFAULT_LIMITS = Limits()
