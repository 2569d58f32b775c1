"""The document an operator mutation prints (one JSON document with ``--json``), as types.

Every mutation command (``lane open|close|set``, ``attempt resolve``, ``message break``,
``shard pause|resume``, ``mutate submit``) prints a ``MutationDocument`` once appended,
or a ``MutationDryRun`` with ``--dry-run``; ``mutate submit`` with several ``[[mutation]]``
tables prints ``Mutations`` (or ``MutationsDryRun``), one document each. The man pages'
JSON sections come from these fields (``nereus.cli.json_keys.typed``).
"""

from __future__ import annotations

import msgspec

from nereus.operator.impact import PolicyChange


class LaneImpact(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A lane whose policy changes on one shard (``nereus.operator.impact.LaneChange``)."""

    shard: str
    lane: str
    changed: dict[str, PolicyChange]
    scheduled: int
    in_flight: int
    messages_by_state: dict[str, int]


class AttemptImpact(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An attempt that settles or moves on one shard (states: ``None`` when absent)."""

    shard: str
    attempt_id: str
    delay_message_id: str
    before: str | None = msgspec.field(name="from")
    after: str | None = msgspec.field(name="to")


class MutationImpact(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the mutation changes on all its shards: message transitions summed (``FROM->TO``
    counts), lanes and attempts per shard, ``messages_held`` the scheduled messages of lanes
    it closes; ``shard_pause`` (``SHARD: paused|resumed``) only for a pause or a resume."""

    shards: int
    messages_changed: int
    message_transitions: dict[str, int]
    messages_held: int
    lanes: list[LaneImpact]
    attempts: list[AttemptImpact]
    shard_pause: list[str] | msgspec.UnsetType = msgspec.UNSET


class MutationReceipt(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One shard's answer to an appended mutation: QUEUED at ``source_position`` (``result``
    null), or APPLIED with its ``result`` (APPLIED, REJECTED, STALE); ``duplicate_of`` the
    first position when the same command had already applied (nothing was appended)."""

    shard: str
    precondition_digest: str
    idempotency_key: str
    source_position: int
    broker_time: str | None
    evidence: str
    result: str | None
    reason: str | None
    detail: str | None
    duplicate_of: int | None


class DryRunReceipt(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One shard's answer to ``--dry-run``: what applying it now would give
    (``would_result``), or the earlier result when the same command already applied
    (``duplicate_of``). Nothing was appended, so there is no position."""

    shard: str
    source_position: None
    broker_time: None
    evidence: str  # DRY_RUN
    precondition_digest: str
    idempotency_key: str
    would_result: str
    would_reason: str | None
    would_detail: str | None
    duplicate_of: int | None


class MutationHead(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What every mutation document opens with: what, by whom, why, and its impact.
    ``idempotency_key`` is null when the mutation went to several shards (each receipt
    names its own)."""

    kind: str
    target: str
    operator: str
    operator_reason: str
    idempotency_key: str | None
    dry_run: bool
    impact: MutationImpact


class MutationDocument(MutationHead, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An appended mutation: a receipt per shard; ``result`` STALE or REJECTED when some
    shard answered so, else QUEUED while some shard has no result yet, else APPLIED."""

    receipts: list[MutationReceipt]
    result: str


class MutationDryRun(MutationHead, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A planned mutation (``--dry-run``): what each shard would answer; ``result`` DRY_RUN."""

    receipts: list[DryRunReceipt]
    result: str


class Mutations(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``mutate submit`` of several mutations: one document each; ``result`` STALE or
    REJECTED when one of them is, else the first one's."""

    mutations: list[MutationDocument]
    result: str


class MutationsDryRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``mutate submit --dry-run`` of several mutations: one dry run each."""

    mutations: list[MutationDryRun]
    result: str
