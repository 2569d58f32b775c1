"""Limits the state machine enforces; they are inputs to apply, like the record bytes.

Replay must use the same limits as the live shard (they come from ``nereus.toml``'s
``[shard]`` table, or these defaults), otherwise a record near a limit could apply
differently. Raising a limit is safe for records already applied. The field types carry
their ranges, so a ``[shard]`` table is checked by the same schema that holds it
(``nereus.config``).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

Positive = Annotated[int, msgspec.Meta(ge=1)]


class Limits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    max_inline_payload_bytes: Positive = 65_536
    max_payload_bytes: Positive = 1 << 30  # a large (object store) payload
    max_headers: Positive = 64
    max_header_bytes: Positive = 16_384  # all header names and values together
    max_id_bytes: Positive = 256
    # a time decision may lead the broker timestamp of its record by at most this: a
    # broker with its own clock (Kafka LogAppendTime) bounds how early a skewed engine
    # clock can make anything
    max_clock_ahead_ms: Positive = 1_000


DEFAULT_LIMITS = Limits()
