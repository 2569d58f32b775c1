"""System Mutations: what the engine itself appends to the Shard Log.

They are ordered with Client Commands, which is what makes "Cancel wins before admission,
never after" decidable by replay alone. The Trusted UTC decision travels inside the
record (``decided_earliest_ms`` / ``decided_latest_ms``) because apply has no clock.

Every system mutation names the owner that wrote it and its fencing epoch (seed 000
sections 2-4). Apply compares them with the applied activation (the live owner): a record
from any other owner, an equal epoch included, is fenced. A fenced admission or claim
result is refused (it is that owner's local judgement); a fenced outcome counts only as
evidence (see ``nereus.machine.fencing``).
"""

from __future__ import annotations

import msgspec

from nereus.records.vocabulary import ClaimDisposition, Disposition, Outcome


class PublishAdmission(msgspec.Struct, frozen=True, kw_only=True, tag="PUBLISH_ADMISSION",
                       tag_field="kind", forbid_unknown_fields=True):
    """The point of no return: when it wins, the attempt is durably PUBLISHING."""

    attempt_id: str  # assigned by the admission executor, not the Claim; an enqueue
    # retry reuses these exact bytes
    delay_message_id: str
    generation: int
    work_digest: str  # the semantic-work digest of the timeline entry that was claimed
    lane: str
    claim_id: str
    claim_sequence: int
    owner_id: str
    fencing_epoch: int
    prepared_digest: str  # SHA-256 of the immutable prepared publish template
    decided_earliest_ms: int  # Trusted UTC interval when the executor decided
    decided_latest_ms: int


class PublishOutcome(msgspec.Struct, frozen=True, kw_only=True, tag="PUBLISH_OUTCOME",
                     tag_field="kind", forbid_unknown_fields=True):
    """A producer callback, turned into a record; it never writes state directly."""

    outcome_id: str
    attempt_id: str
    delay_message_id: str
    owner_id: str  # the owner that observed the outcome
    fencing_epoch: int
    outcome: Outcome
    disposition: Disposition = Disposition.NONE
    evidence: str = ""  # destination evidence: partition+offset, MessageId, file offset


class ClaimResult(msgspec.Struct, frozen=True, kw_only=True, tag="CLAIM_RESULT",
                  tag_field="kind", forbid_unknown_fields=True):
    """A claim ended without an attempt: proven permanent pre-send error, or expiry."""

    mutation_id: str
    delay_message_id: str
    generation: int
    work_digest: str
    owner_id: str  # the owner whose claim ended
    fencing_epoch: int
    disposition: ClaimDisposition
    detail: str = ""
    decided_earliest_ms: int
    decided_latest_ms: int


class ActivationBarrier(msgspec.Struct, frozen=True, kw_only=True, tag="ACTIVATION_BARRIER",
                        tag_field="kind", forbid_unknown_fields=True):
    """Appended by a new owner; once applied, the owner may accept new work."""

    barrier_id: str
    owner_id: str
    fencing_epoch: int


class RouteIdentity(msgspec.Struct, frozen=True, kw_only=True, tag="ROUTE_IDENTITY",
                    tag_field="kind", forbid_unknown_fields=True):
    """The first record of every partition of a route's Shard Log: whose log this is.

    Every engine start and every client append checks it against the configuration, so
    a home never adopts another home's Command Topic, and a partition count never changes
    under data (which would move message ids to other shards).
    """

    route_id: str  # made by `nereus init` (nereus.toml [routes.NAME] id); "" if none
    route: str
    partition: int
    partitions: int


class CheckpointMark(msgspec.Struct, frozen=True, kw_only=True, tag="CHECKPOINT_MARK",
                     tag_field="kind", forbid_unknown_fields=True):
    """Marks in the log where a checkpoint was taken, for audit and deep verification."""

    mutation_id: str
    checkpoint_id: str
    owner_id: str  # who took it: the live owner, or an offline tool (recorded, not applied)
    fencing_epoch: int


class Sweep(msgspec.Struct, frozen=True, kw_only=True, tag="SWEEP", tag_field="kind",
            forbid_unknown_fields=True):
    """Remove what retention let go (``nereus.machine.retention``): the ``retain`` keys the
    owner found due, oldest first. Apply removes each one still held whose expireAt is at
    or before this record's broker time, and what it names (a terminal message with its
    attempts and payload stage, or a result); any other is skipped. The keys travel in the
    record, so replay removes exactly what the live shard removed."""

    mutation_id: str
    owner_id: str
    fencing_epoch: int
    entries: tuple[bytes, ...]  # full ``retain`` keys (prefix 0x0B), at most 500


class RetainBackfill(msgspec.Struct, frozen=True, kw_only=True, tag="RETAIN_BACKFILL",
                     tag_field="kind", forbid_unknown_fields=True):
    """Catch up retention (``nereus.machine.catch_up``): the terminal messages the owner
    found, by a cursor of its own, that ended before their lane first had a retention and
    so have no ``retain`` entry. Apply gives each one still eligible by the state (terminal,
    its lane's ``catch_up`` covering it, no entry yet) its entry at the lane's catch-up
    time, or removes it at once if that time has passed by this record's broker time; any
    other id is skipped. The ids travel in the record, so replay does exactly the same."""

    mutation_id: str
    owner_id: str
    fencing_epoch: int
    delay_message_ids: tuple[str, ...]  # at most 500 ids and positions in all
    # payload stages no message used, from before the shard's window was given (the
    # shard's ``stage_catch_up``): each still eligible gets its ``p`` entry, or goes at
    # once when that time has passed. UNSET: not encoded (records naming none keep the
    # bytes they had before it existed).
    payload_ids: tuple[str, ...] | msgspec.UnsetType = msgspec.UNSET
    # results from while the shard had no window (its ``result_catch_ups``): dedup keys of
    # results, and positions of ``reject`` results; each still eligible gets its entry, or
    # goes at once when that time has passed. UNSET: not encoded, as ``payload_ids``.
    result_keys: tuple[str, ...] | msgspec.UnsetType = msgspec.UNSET
    reject_positions: tuple[int, ...] | msgspec.UnsetType = msgspec.UNSET


class PublishBatch(msgspec.Struct, frozen=True, kw_only=True, tag="PUBLISH_BATCH",
                   tag_field="kind", forbid_unknown_fields=True):
    """An envelope of one turn's PUBLISH_ADMISSION and PUBLISH_OUTCOME records, appended as
    one Shard Log record (feature level 2: ``nereus.features.PUBLISH_BATCH_LEVEL``).

    Each member is the complete canonical body of the record it carries (its MessagePack
    map, without the ``NR`` header), exactly the bytes that record has on its own, so each
    keeps its own dedup key, result and SHA-256, and applying the batch equals applying its
    members one by one at the batch's position (``nereus.machine.apply``). A member that is
    not a canonical admission or outcome rejects the whole batch before any member applies.
    The envelope has no identity of its own: an append retried with other members around the
    same ones is harmless, each member being deduplicated by itself."""

    members: tuple[msgspec.Raw, ...]  # at most ``MAX_BATCH_MEMBERS``, at least one
