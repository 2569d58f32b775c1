"""The shard's limits on what apply accepts (``[shard]`` in nereus.toml).

They are inputs of apply like the record bytes, so they travel in the Shard Log: the
owner replicates its configuration's ``[shard]`` table with a SHARD_LIMITS record, and
apply reads them from the shard's state (``meta/shard_limits``), never from the
configuration of whoever applies the log. A shard whose log never carried one applies
``DEFAULT_LIMITS``. The field types carry their ranges, so a ``[shard]`` table and a
SHARD_LIMITS record are checked by the same schema.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

Positive = Annotated[int, msgspec.Meta(ge=1, le=(1 << 63) - 1)]


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


DEFAULT_LIMITS: Final = Limits()
