"""The one path every operator mutation takes: plan, show, confirm, append, report.

``lane open|close|set``, ``attempt resolve``, ``message break``, ``shard pause|resume``
and ``mutate submit`` only build records; this module does the rest, the same way for
all of them:

1. **identity**: ``--as`` (default: the user), ``--reason`` (required, not blank), the
   idempotency key (``--idempotency-key``, else derived from the command's content, so
   running the same command again finds the first result and appends nothing);
2. **plan** per target shard (``nereus.operator.plan_mutation``): through the admin
   socket when the engine runs, else against the shard database opened read-only with
   the log's not yet applied records dry-applied on top (the state the mutation will
   meet, since it is appended after them). The
   plan fills in the precondition digest of what the operator is looking at, so a state
   change between planning and applying makes the mutation STALE instead of acting on a
   world the operator never saw; it also dry-applies the record to say what would change;
3. ``--dry-run`` stops here and writes nothing;
4. **confirmation** for destructive mutations: a prompt on a terminal, ``--yes`` in
   scripts; without a terminal and without ``--yes`` the command refuses (exit 2) rather
   than wait for an answer nobody can give;
5. **append** to the Shard Log (through the engine, or straight to the log file), so the
   mutation is ordered with client commands and the log is the audit trail
   (``nereus shard log SHARD --kind LANE_GATE``); with ``--wait`` the applied result.
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
