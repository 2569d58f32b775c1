"""PUBLISH_BATCH: one turn's admissions and outcomes as one Shard Log record.

A shard owner used to append each PUBLISH_ADMISSION and PUBLISH_OUTCOME as a record of
its own: a frame, a read, a hash and a dispatch each, twice per published message. At
feature level 2 (``nereus.features.PUBLISH_BATCH_LEVEL``) the records one turn decided
travel in one envelope instead (``docs/decisions/0025-publish-batch-envelope.md``). Each
member is the canonical body of the record it carries, byte for byte (``member_bytes``
gives the record back, header and all), so it keeps its own dedup key, result and
SHA-256: applying the batch equals applying its members one by one at its position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from nereus.records.codec import HEADER, DecodeFailure, decode, encode_at, kind_of
from nereus.records.system import PublishAdmission, PublishBatch, PublishOutcome

MAX_BATCH_MEMBERS: Final = 1_000  # members one envelope may carry
Member = PublishAdmission | PublishOutcome
MEMBER_KINDS: Final = (PublishAdmission, PublishOutcome)


def encode_batch(records: Sequence[bytes], level: int) -> bytes:
    """The PUBLISH_BATCH carrying ``records`` (each an encoded admission or outcome), in
    their order; ``FeatureLevelError`` below the batch's level, nothing written."""
    assert records and len(records) <= MAX_BATCH_MEMBERS
    members = tuple(msgspec.Raw(data[len(HEADER):]) for data in records)
    return encode_at(PublishBatch(members=members), level)


def member_bytes(raw: msgspec.Raw) -> bytes:
    """A member as the record it carries: what that record's bytes would be on its own."""
    return HEADER + bytes(raw)


def unpack(batch: PublishBatch) -> list[tuple[bytes, Member]] | DecodeFailure:
    """Each member's record bytes and record, in order, or why the batch is not valid:
    empty, too many members, or a member that is not a canonical admission or outcome
    (``field`` names it: ``members[i]``). All or nothing, before any member applies."""
    count = len(batch.members)
    if not 0 < count <= MAX_BATCH_MEMBERS:
        return DecodeFailure("INVALID_FIELD", f"a PUBLISH_BATCH carries 1 to "
                             f"{MAX_BATCH_MEMBERS} members, not {count}", field="members")
    found: list[tuple[bytes, Member]] = []
    for index, raw in enumerate(batch.members):
        data = member_bytes(raw)
        record = decode(data)
        if isinstance(record, DecodeFailure):
            return DecodeFailure(record.reason, f"members[{index}]: {record.detail}",
                                 field=f"members[{index}]")
        if not isinstance(record, MEMBER_KINDS):
            return DecodeFailure("INVALID_FIELD", f"members[{index}] is a {kind_of(record)}; "
                                 "a PUBLISH_BATCH carries admissions and outcomes only",
                                 field=f"members[{index}]")
        found.append((data, record))
    return found


def records_in(data: bytes) -> list[bytes]:
    """The records ``data`` carries, for tools that show a log record by record: a valid
    PUBLISH_BATCH's members' bytes in order, and anything else (a rejected batch included)
    as itself."""
    record = decode(data)
    if type(record) is not PublishBatch:
        return [data]
    members = unpack(record)
    return [data] if isinstance(members, DecodeFailure) else [raw for raw, _ in members]
