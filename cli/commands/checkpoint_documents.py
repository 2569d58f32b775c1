"""The ``--json`` documents of ``nereus checkpoint`` and ``nereus recovery-set`` that the CLI
builds itself (``checkpoint create`` prints ``adapters.checkpoint_take.CheckpointTaken``,
``checkpoint verify`` the core's ``CheckpointVerification``).

The man pages' JSON sections are generated from these types
(``nereus.cli.json_keys.typed``), and ``tests/cli/test_typed_documents.py`` holds each
command's output to them.
"""

from __future__ import annotations

import msgspec

from nereus.checkpoint.verify import Check


class CheckpointUpgrade(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``checkpoint upgrade`` document: a checkpoint directory's manifest, verified and
    rewritten as the current format (``upgraded`` false when it already was)."""

    path: str
    checkpoint_id: str
    format_version_before: int
    format_version: int
    upgraded: bool
    digest: str


class CheckpointRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One catalogued checkpoint in ``checkpoint list``."""

    checkpoint_id: str
    applied_position: int | None
    digest: str
    created_at: str
    in_recovery_set: bool


class CheckpointList(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``checkpoint list`` document: a shard's catalogued checkpoints, oldest first."""

    shard: str
    checkpoints: list[CheckpointRow]


class CheckpointRestore(msgspec.Struct, frozen=True, kw_only=True,
                        forbid_unknown_fields=True):
    """The ``checkpoint restore`` document: what was restored where, and every check.
    ``replaced`` is null (``into`` was new or empty), ``restored`` or ``foreign``."""

    checkpoint_id: str
    shard: str
    into: str
    applied_position: int | None
    digest: str
    ok: bool
    replaced: str | None
    checks: list[Check]


class PruneRefusal(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A checkpoint ``checkpoint prune`` would not delete, and why."""

    checkpoint_id: str
    applied_position: int | None
    reason: str


class CheckpointPrune(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``checkpoint prune`` document; ``kept`` and ``deleted`` are checkpoint ids
    (``deleted``: the ones that would go, with ``dry_run``)."""

    shard: str
    keep: int
    recovery_set_keep: int
    dry_run: bool
    object_store: str
    kept: list[str]
    deleted: list[str]
    refused: list[PruneRefusal]


class RecoveryMember(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A member of a Recovery Set (a catalogued checkpoint)."""

    checkpoint_id: str
    applied_position: int | None
    digest: str
    created_at: str


class RecoverySetView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``recovery-set show`` document: the members and the Recovery Floor they impose.
    ``log_start_position`` is null when this home has no Shard Log for the shard."""

    shard: str
    keep: int
    object_store: str
    floor_position: int
    floor_objects: list[str]
    log_start_position: int | None
    members: list[RecoveryMember]


class MemberReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One member's own verification in ``recovery-set verify``."""

    checkpoint_id: str
    ok: bool
    checks: list[Check]


class RecoverySetVerification(RecoverySetView, frozen=True, kw_only=True,
                              forbid_unknown_fields=True):
    """The ``recovery-set verify`` document: the ``show`` keys, then the verdict, the
    set's checks (one per member, log retention, external objects) and each member's
    report."""

    ok: bool
    checks: list[Check]
    member_reports: list[MemberReport]
