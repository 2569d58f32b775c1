"""Reversible local Claims, persisted in the shard's ``claim`` family (local state).

A Claim reserves one message's current timeline work for this owner (seed 000 §2): checked
claimSequence, claimId, owner and store, deadline and epoch, what it revalidated, and the
immutable template with its digest. It carries **no attempt identity**, so it can be
revoked and the work claimed again without consuming an attempt; the book records which
attempt names which claim once the admission is prepared (``admission``). Claims are
written unsynced and outside the digest: the Shard Log, not a claim, decides whether an
attempt exists, and after a restart any admitted attempt without a live claim is
recovered as UNKNOWN. Claims, their preparation time and revocations are counted apart
from admissions (``ClaimWatch``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

import msgspec

from nereus.engine.scheduler.permits import Permits
from nereus.publish import PublishTemplate

if TYPE_CHECKING:
    from nereus.engine.scheduler.admission import PreparedAdmission


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    claim_id: str
    claim_sequence: int  # checked: strictly increasing per shard (``drr.DrrState``)
    owner_id: str
    store_id: str
    fencing_epoch: int
    deadline_mono_ms: int
    delay_message_id: str
    lane: str
    generation: int
    work_digest: str
    timeline_key: bytes  # the exact timeline entry claimed
    revision: int  # the message's runtime revision when claimed (its updated_position)
    template: PublishTemplate
    template_digest: str  # the prepared publish descriptor's hash
    size_bytes: int
    prepare_s: float = 0.0  # the claim's local preparation time (claim latency)


class Revocation(StrEnum):
    """Why a claim ended before its attempt reached a publisher (a bounded metric label)."""

    DEADLINE = "deadline"  # its deadline passed before its admission was acted on
    STALE = "stale_admission"  # its admission did not win (STALE or REJECTED)
    FENCED = "fenced"  # this owner was fenced
    HANDOVER = "handover"  # its admission won, but a hand-over check refused the send


class ClaimWatch(Protocol):
    """Who counts claims apart from admissions (the loop's ``ShardMetrics``)."""

    def claimed(self, lane: str, prepare_s: float) -> None: ...

    def revoked(self, lane: str, reason: Revocation) -> None: ...


class _Unwatched:
    def claimed(self, lane: str, prepare_s: float) -> None:
        pass

    def revoked(self, lane: str, reason: Revocation) -> None:
        pass


class ClaimBook:
    """This owner's live claims on one shard: by message (what the planner reads and adds
    to), the admission prepared for each (by attempt: what admissions and outcomes name),
    and which were handed to a publisher. Releasing a claim returns its permits and forgets
    its local row.

    Local state of one shard loop thread: not shared, not locked.
    """

    def __init__(self, permits: Permits, forget: Callable[[str], None],
                 watch: ClaimWatch | None = None) -> None:
        self.by_message: dict[str, Claim] = {}
        self.dispatched: set[str] = set()  # attempt ids handed to a publisher
        self.dispatched_claims: set[str] = set()  # their claim ids (quota: admitted)
        self._admissions: dict[str, PreparedAdmission] = {}  # attempt id -> admission
        self._attempt_of: dict[str, str] = {}  # claim id -> attempt id
        self._revoked: set[str] = set()  # claim ids counted revoked, not yet released
        self._permits = permits
        self._forget = forget
        self._watch = watch if watch is not None else _Unwatched()

    def __len__(self) -> int:
        return len(self.by_message)

    @property
    def undispatched(self) -> int:
        """Claims whose admission is not yet with a publisher."""
        return len(self.by_message) - len(self.dispatched)

    def admit(self, admission: PreparedAdmission) -> None:
        """A claim the planner just made (already in ``by_message``) and the admission the
        executor prepared for it, with its attempt id."""
        claim = admission.claim
        self._admissions[admission.attempt_id] = admission
        self._attempt_of[claim.claim_id] = admission.attempt_id
        self._watch.claimed(claim.lane, claim.prepare_s)

    def for_attempt(self, attempt_id: str) -> Claim | None:
        admission = self._admissions.get(attempt_id)
        return None if admission is None else admission.claim

    def attempt_of(self, claim: Claim) -> str | None:
        """The attempt id the claim's admission carries (None before it is prepared)."""
        return self._attempt_of.get(claim.claim_id)

    def is_current(self, claim: Claim) -> bool:
        """Still the claim on its message (not revoked or replaced)."""
        return self.by_message.get(claim.delay_message_id) is claim

    def dispatch(self, attempt_id: str) -> None:
        self.dispatched.add(attempt_id)
        admission = self._admissions.get(attempt_id)
        if admission is not None:
            self.dispatched_claims.add(admission.claim.claim_id)

    def revoked(self, claim: Claim, reason: Revocation) -> None:
        """Count a revocation whose claim is released later (a declined hand-over); a claim
        is counted revoked once, whatever ends it afterwards."""
        if claim.claim_id not in self._revoked:
            self._revoked.add(claim.claim_id)
            self._watch.revoked(claim.lane, reason)

    def release(self, claim: Claim, revoked: Revocation | None = None) -> None:
        """The claim ends: with its outcome, or ``revoked`` before reaching a publisher."""
        attempt_id = self._attempt_of.pop(claim.claim_id, None)
        if attempt_id is not None:
            self._admissions.pop(attempt_id, None)
            self.dispatched.discard(attempt_id)
        self.dispatched_claims.discard(claim.claim_id)
        if self.by_message.get(claim.delay_message_id) is claim:
            del self.by_message[claim.delay_message_id]
        self._permits.release(claim.lane, claim.size_bytes)
        self._forget(claim.delay_message_id)
        if revoked is not None:
            self.revoked(claim, revoked)
        self._revoked.discard(claim.claim_id)

    def release_undispatched(self, revoked: Revocation) -> None:
        """Every claim not yet with a publisher (the owner was fenced)."""
        for claim in list(self.by_message.values()):
            if claim.claim_id not in self.dispatched_claims:
                self.release(claim, revoked)

    def expired(self, mono_ms: int) -> list[Claim]:
        """Claims whose deadline passed before their admission reached a publisher."""
        return [claim for claim in self.by_message.values()
                if claim.deadline_mono_ms < mono_ms
                and claim.claim_id not in self.dispatched_claims]

    def held_keys(self) -> set[tuple[str, str]]:
        """(lane, key) of every claimed message with an ordering key."""
        return {(claim.lane, claim.template.key) for claim in self.by_message.values()
                if claim.template.key is not None}


class LocalStore(Protocol):
    def write(self, writes: Mapping[bytes, bytes | None], *, sync: bool = True) -> None: ...


class LocalRows:
    """Local rows (claims, the planner's state) waiting to be written, all in one unsynced
    WriteBatch: a turn that releases hundreds of claims writes once, not once per claim.

    A row set again before the write replaces what was waiting (a claim made again after
    its release overwrites the delete). Unwritten rows lost in a crash cost nothing: a
    restart discards every claim row anyway.
    """

    def __init__(self, store: LocalStore) -> None:
        self._store = store
        self._rows: dict[bytes, bytes | None] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def put(self, key: bytes, value: bytes | None) -> None:
        """Set ``key`` (None deletes) with the next write."""
        self._rows[key] = value

    def write(self) -> None:
        """Write every row waiting, if any, in one unsynced WriteBatch."""
        if self._rows:
            rows, self._rows = self._rows, {}
            self._store.write(rows, sync=False)


def encode_claim(claim: Claim) -> bytes:
    """The persisted claim: everything but the payload bytes (a large payload stays in the
    object store; the in-memory claim holds the materialised template)."""
    stored = msgspec.structs.replace(
        claim, template=msgspec.structs.replace(claim.template, payload=b""))
    return msgspec.msgpack.encode(stored)
