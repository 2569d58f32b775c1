"""Client Commands: what applications ask a shard to do.

Each is a frozen msgspec Struct tagged with its kind; the codec in ``codec.py`` turns
them into canonical bytes. Times are epoch milliseconds UTC and say so in their names.
``command_id`` is fixed when the command is prepared and reused on every retry: it is the
deduplication key.
"""

from __future__ import annotations

import msgspec


class Schedule(msgspec.Struct, frozen=True, kw_only=True, tag="SCHEDULE", tag_field="kind",
               forbid_unknown_fields=True):
    """Create a managed Delayed Message, published not before ``deliver_at_ms``."""

    command_id: str
    delay_message_id: str
    lane: str
    deliver_at_ms: int
    # earliest destination action. None: derived when applied from the lane's replicated
    # handoff lead (deliverAt - lead; deliverAt on a lane without one). An explicit value
    # earlier than that is REJECTED: deliverAt is a not-before boundary on every path.
    action_at_ms: int | None = None
    expire_at_ms: int | None = None  # closes new Publish Admission
    key: str | None = None  # ordering / partitioning key at the destination
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    payload: bytes = b""  # inline payload, bounded by the shard's limit
    payload_ref: str | None = None  # a committed large payload (PAYLOAD_COMMIT) instead


class Cancel(msgspec.Struct, frozen=True, kw_only=True, tag="CANCEL", tag_field="kind",
             forbid_unknown_fields=True):
    """Cancel a message; wins only while it has no admitted attempt."""

    command_id: str
    delay_message_id: str


class Reschedule(msgspec.Struct, frozen=True, kw_only=True, tag="RESCHEDULE", tag_field="kind",
                 forbid_unknown_fields=True):
    """Move a message to a new time; bumps its generation. Same boundary as Cancel."""

    command_id: str
    delay_message_id: str
    deliver_at_ms: int
    action_at_ms: int | None = None  # as for SCHEDULE: None keeps the lane's handoff lead
    expire_at_ms: int | None = None


class QueryBarrier(msgspec.Struct, frozen=True, kw_only=True, tag="QUERY_BARRIER",
                   tag_field="kind", forbid_unknown_fields=True):
    """A marker: once applied, every command queued before it has an applied answer."""

    command_id: str
    # behind the test-only feature level (``nereus.features.TEST_LEVEL``): absent, the
    # record's bytes are those of level 1; present, a build below that level refuses it
    label: str | msgspec.UnsetType = msgspec.UNSET


class PayloadReserve(msgspec.Struct, frozen=True, kw_only=True, tag="PAYLOAD_RESERVE",
                     tag_field="kind", forbid_unknown_fields=True):
    """Reserve a large payload stage before uploading it to the object store."""

    command_id: str
    payload_id: str
    size_bytes: int
    sha256: str
    expires_at_ms: int  # an abandoned reservation may be collected after this


class PayloadCommit(msgspec.Struct, frozen=True, kw_only=True, tag="PAYLOAD_COMMIT",
                    tag_field="kind", forbid_unknown_fields=True):
    """Commit an uploaded and attested payload so a SCHEDULE may reference it."""

    command_id: str
    payload_id: str
    size_bytes: int
    sha256: str
    object_key: str
