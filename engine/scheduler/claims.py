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

from collections.abc import Callable, Mapping
from typing import Protocol

import msgspec

from nereus.engine.scheduler.permits import Permits
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


class ClaimBook:
    """This owner's live claims on one shard: by message (what the planner reads and adds
    to), by attempt (what admissions and outcomes name), and which were handed to a
    publisher. Releasing a claim returns its permits and forgets its local row.

    Local state of one shard loop thread: not shared, not locked.
    """

    def __init__(self, permits: Permits, forget: Callable[[str], None]) -> None:
        self.by_message: dict[str, Claim] = {}
        self.dispatched: set[str] = set()  # attempt ids handed to a publisher
        self._by_attempt: dict[str, Claim] = {}
        self._permits = permits
        self._forget = forget

    def __len__(self) -> int:
        return len(self.by_message)

    @property
    def undispatched(self) -> int:
        """Claims whose admission is not yet with a publisher."""
        return len(self._by_attempt) - len(self.dispatched)

    def track(self, claim: Claim) -> None:
        """A claim the planner just made (it is already in ``by_message``)."""
        self._by_attempt[claim.attempt_id] = claim

    def for_attempt(self, attempt_id: str) -> Claim | None:
        return self._by_attempt.get(attempt_id)

    def is_current(self, claim: Claim) -> bool:
        """Still the claim on its message (not revoked or replaced)."""
        return self.by_message.get(claim.delay_message_id) is claim

    def dispatch(self, attempt_id: str) -> None:
        self.dispatched.add(attempt_id)

    def release(self, claim: Claim) -> None:
        self._by_attempt.pop(claim.attempt_id, None)
        self.dispatched.discard(claim.attempt_id)
        if self.by_message.get(claim.delay_message_id) is claim:
            del self.by_message[claim.delay_message_id]
        self._permits.release(claim.lane, claim.size_bytes)
        self._forget(claim.delay_message_id)

    def release_undispatched(self) -> None:
        """Every claim not yet with a publisher (the owner was fenced)."""
        for claim in list(self._by_attempt.values()):
            if claim.attempt_id not in self.dispatched:
                self.release(claim)

    def expired(self, mono_ms: int) -> list[Claim]:
        """Claims whose deadline passed before their admission reached a publisher."""
        return [claim for claim in self.by_message.values()
                if claim.deadline_mono_ms < mono_ms and claim.attempt_id not in self.dispatched]

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
