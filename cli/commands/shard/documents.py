"""The ``--json`` documents of the offline ``nereus shard`` commands that the CLI puts
together (the core's own reports are ``nereus.inspection.ShardReport``,
``nereus.records.summary.LogEntry`` and ``nereus.state.decode.DumpEntry``). Their keys are
these fields: ``nereus.cli.json_keys`` documents them, ``tests/cli/test_typed_documents.py``
holds each command to its type. A key printed only in some cases is an ``UNSET`` default,
left out of the document when not set."""

from __future__ import annotations

import msgspec

from nereus.state.decode import DumpEntry


class OfflineShard(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One shard of ``shard list`` read offline (no engine running): STOPPED with its
    database's applied position, or NO_STATE when it has no database yet; ``lag`` is None
    when where its log ends is not known."""

    shard: str
    state: str
    applied_position: int | None
    log_end_position: int | None
    lag: int | None


class ShardDump(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``shard dump``: the decoded entries, at most ``--limit`` (``truncated`` when more
    were left)."""

    shard: str
    count: int
    truncated: bool
    entries: list[DumpEntry]


class ShardReplay(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``shard replay``: what was applied and the digest reached. ``from_checkpoint`` only
    with --from-checkpoint or --compare (None when replay started empty); ``compare``,
    ``expected_digest`` and ``match`` only with --compare. ``into`` is None when the
    database went to a temporary directory (since removed)."""

    shard: str
    from_checkpoint: str | msgspec.UnsetType | None = msgspec.UNSET
    records_applied: int
    applied_position: int | None
    digest: str
    into: str | None
    compare: str | msgspec.UnsetType = msgspec.UNSET  # what was compared against
    expected_digest: str | msgspec.UnsetType = msgspec.UNSET
    match: bool | msgspec.UnsetType = msgspec.UNSET


class ShardDigest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``shard digest``: the canonical digest of a database and where it was read."""

    shard: str
    digest: str
    applied_position: int | None
    db: str


class ShardPrune(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``shard prune``: the log below ``before`` deleted (or, with --dry-run, what would
    be), each part described; where the log starts afterwards."""

    shard: str
    before: int
    floor_position: int
    dry_run: bool
    deleted: list[str]
    log_start_position: int
