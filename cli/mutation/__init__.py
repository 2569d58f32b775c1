"""The one path every operator mutation takes: plan, show, confirm, append, report.

``lane open|close|set``, ``attempt resolve``, ``message break``, ``shard pause|resume`` and
``mutate submit`` only build records; here, for all of them:

1. identity: ``--as``, ``--reason`` (required), the idempotency key (given, or derived from
   the content, so running the command again finds its first result and appends nothing);
2. plan per shard (``nereus.operator.plan_mutation``) through the engine, or against the
   database read-only with the log's unapplied records dry-applied first; the
   precondition digest makes a state changed since planning STALE;
3. ``--dry-run`` stops here; 4. destructive mutations ask on a terminal, take ``--yes`` in
   scripts, and refuse (exit 2) with neither;
5. append to the Shard Log, the audit trail; with ``--wait`` the applied result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nereus.cli.context import Env
from nereus.cli.mutation.appending import commit
from nereus.cli.mutation.confirmation import confirm
from nereus.cli.mutation.options import (
    AsOpt,
    DryRunOpt,
    Identity,
    KeyOpt,
    PreconditionOpt,
    ReasonOpt,
    WaitOpt,
    YesOpt,
    identity,
)
from nereus.cli.mutation.planning import Build, Planned, every_shard, plan
from nereus.cli.mutation.reporting import failed, not_known, print_document, report
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from nereus.cli.mutation.document import MutationDocument, MutationDryRun
    from nereus.shard import ShardId

__all__ = [
    "AsOpt", "Build", "DryRunOpt", "Identity", "KeyOpt", "Planned", "PreconditionOpt",
    "ReasonOpt", "WaitOpt", "YesOpt", "commit", "confirm", "every_shard", "failed",
    "identity", "not_known", "plan", "print_document", "report", "run",
]


def run(env: Env, *, build: Build, shards: Sequence[ShardId], who: Identity,
        dry_run: bool, yes: bool, wait: bool) -> None:
    """Plan ``build(shard)`` on every shard, confirm, append, report (see the module doc)."""
    planned = plan(env, build=build, shards=shards, who=who, dry_run=dry_run, wait=wait)
    document: MutationDocument | MutationDryRun
    if dry_run:
        document = planned.dry_run()
    else:
        if planned.destructive and not yes:
            confirm(env, [planned])
        document = commit(env, planned, wait=wait)
    report(env, document)
    if failed(document):
        raise Answered(ExitCode.NO)
    not_known(env, [document], wait=wait and not dry_run)
