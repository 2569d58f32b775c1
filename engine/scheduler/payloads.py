"""Large payloads, materialised at Claim.

A message with ``payload_ref`` names a COMMITTED payload stage (``payload/<id>``) whose
``object_key`` is fetched with ``FetchPayload`` and checked against the attested size and
SHA-256 before it goes into the immutable PublishTemplate (so ``prepared_digest`` covers the
real bytes, and the byte permit counts them). An object that is missing, corrupt or does not
match the attestation is a proven permanent pre-send error: CLAIM_RESULT PERMANENT_ERROR
through the log, naming the key. An object store that does not answer proves nothing: the
message is skipped and stays due, and no further large payload is tried in that round.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from nereus.adapters.backends.objectstore.protocol import ObjectCorrupt, ObjectMissing
from nereus.errors import ServiceUnreachable
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import PayloadStage, decode_value

FetchPayload = Callable[[str], bytes]
"""Given an object key, the object's bytes (the store verifies its recorded SHA-256).

Raises ``ObjectMissing`` / ``ObjectCorrupt`` (proven permanent) or ``ServiceUnreachable``
(proves nothing: try again later)."""


@dataclass(frozen=True, slots=True)
class Unfetched:
    """Why a large payload's bytes are not in hand: ``permanent`` (the object is missing,
    corrupt or not what was attested) or the store did not answer (try again later)."""

    permanent: bool
    why: str


def committed_stage(store: ShardStore, payload_id: str) -> tuple[PayloadStage | None, str | None]:
    """The COMMITTED stage a message references, or why there is none (permanent)."""
    raw = store.get(keys.payload_key(payload_id))
    if raw is None:
        return None, f"large payload {payload_id} has no payload stage on this shard"
    stage = decode_value(raw, PayloadStage)
    if stage.state != "COMMITTED" or stage.object_key is None:
        return None, f"large payload {payload_id} is {stage.state}, not COMMITTED"
    return stage, None


def fetch_attested(fetch: FetchPayload | None, stage: PayloadStage) -> bytes | Unfetched:
    """The stage's object bytes, fetched and checked against its attestation."""
    key = stage.object_key
    assert key is not None
    if fetch is None:
        return Unfetched(permanent=False, why="no object store to fetch large payloads from")
    try:
        data = fetch(key)
    except ServiceUnreachable as exc:
        return Unfetched(permanent=False, why=f"object store unreachable: {exc.message}")
    except (ObjectMissing, ObjectCorrupt) as exc:
        what = "missing" if isinstance(exc, ObjectMissing) else "corrupt"
        return Unfetched(permanent=True, why=f"large payload {stage.payload_id}: object {key} "
                         f"is {what} ({exc.message})")
    sha = hashlib.sha256(data).hexdigest()
    if (len(data), sha) != (stage.size_bytes, stage.sha256):
        return Unfetched(permanent=True, why=(
            f"large payload {stage.payload_id}: object {key} holds {len(data)} bytes "
            f"sha256 {sha[:16]}.. but {stage.size_bytes} bytes sha256 "
            f"{stage.sha256[:16]}.. were attested"))
    return data
