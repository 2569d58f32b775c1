"""Reversible local Claims, persisted in the shard's ``claim`` family (local state).

A Claim reserves one message's current timeline work for this owner: checked
claimSequence, claimId, owner and store identity, deadline and fencing epoch, plus the
immutable publish template and the attempt id its admission carries. Claims are written
without sync and excluded from the state digest: losing one in a crash is harmless,
because the Shard Log (not the claim) decides whether an attempt exists; after a restart
every claim is discarded and any admitted attempt without a live claim is recovered as
UNKNOWN.
"""

from __future__ import annotations

import msgspec

from nereus.publish import PublishTemplate


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    claim_id: str
    claim_sequence: int
    owner_id: str
    store_id: str
    fencing_epoch: int
    deadline_mono_ms: int
    delay_message_id: str
    lane: str
    generation: int
    work_digest: str
    attempt_id: str
    admission: bytes  # the exact PUBLISH_ADMISSION bytes; an enqueue retry resends these
    template: PublishTemplate
    size_bytes: int
