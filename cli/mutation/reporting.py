"""Reporting a mutation: its document (one JSON document with ``--json``), the human
rendering, and the exit status its answer calls for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.mutation.document import (
        DryRunReceipt,
        MutationDocument,
        MutationDryRun,
        MutationImpact,
        MutationReceipt,
    )


def report(env: Env, document: MutationDocument | MutationDryRun) -> None:
    import msgspec

    from nereus.cli.output import shown

    env.output.emit(msgspec.to_builtins(document),
                    lambda out: print_document(out, shown(document)))


def print_document(out: Console, doc: MutationDocument | MutationDryRun) -> None:
    """The human rendering of one mutation's document (its strings already ``shown``)."""
    from nereus.cli.output import safe_markup as escape

    head = escape(describe(doc.kind, doc.target))
    out.print(f"{'DRY RUN: ' if doc.dry_run else ''}{head} "
              f"[dim](by {escape(doc.operator)}: {escape(doc.operator_reason)})[/dim]")
    print_impact(out, doc.impact)
    for r in doc.receipts:
        out.print(_receipt_line(r))
    if doc.dry_run:
        out.print("nothing was written (--dry-run)")


def _receipt_line(r: MutationReceipt | DryRunReceipt) -> str:
    from nereus.cli.mutation.document import DryRunReceipt

    if isinstance(r, DryRunReceipt):
        why = f" ({r.would_reason}: {r.would_detail})" if r.would_reason else (
            f": {r.would_detail}" if r.would_detail else "")
        again = f" (already applied at position {r.duplicate_of}: nothing to do)" \
            if r.duplicate_of is not None else ""
        return (f"  {r.shard}: would be {r.would_result}{why}{again}  "
                f"(precondition {r.precondition_digest})")
    if r.evidence == "QUEUED":
        return (f"  {r.shard}: queued at position {r.source_position}  (QUEUED: "
                "durable in the Shard Log, applied when the engine runs)")
    why = f" ({r.reason}: {r.detail})" if r.reason else (f": {r.detail}" if r.detail else "")
    again = " (no-op: this command was already applied)" if r.duplicate_of is not None else ""
    return f"  {r.shard}: {r.result} at position {r.source_position}{why}{again}"


def print_impact(out: Console, impact: MutationImpact) -> None:
    """The impact's lines (its strings already ``shown``)."""
    import msgspec

    for lane in impact.lanes:
        changes = ", ".join(f"{name} {c.before} -> {c.after}"
                            for name, c in lane.changed.items()) or "no policy change"
        out.print(f"  lane {lane.lane} on {lane.shard}: {changes}; "
                  f"{lane.scheduled} scheduled, {lane.in_flight} in flight")
    if impact.messages_changed:
        moves = ", ".join(f"{n} {t}" for t, n in impact.message_transitions.items())
        out.print(f"  messages: {moves}")
    for a in impact.attempts:
        out.print(f"  attempt {a.attempt_id} ({a.delay_message_id}) on {a.shard}: "
                  f"{a.before} -> {a.after}")
    if not isinstance(impact.shard_pause, msgspec.UnsetType):
        for line in impact.shard_pause:
            out.print(f"  shard {line}")


def describe(kind: str, target: str) -> str:
    verbs = {"LANE_GATE": "Change the gate of", "LANE_CONFIG": "Change the policy of",
             "LANE_LIMITS": "Change the limits of",
             "ATTEMPT_RESOLVE": "Resolve", "MESSAGE_BREAK": "Break",
             "SHARD_PAUSE": "Pause", "SHARD_RESUME": "Resume"}
    return f"{verbs.get(kind, kind)} {target}"


def failed(doc: MutationDocument | MutationDryRun) -> bool:
    """True when the answer is "no": rejected, stale, or (dry run) would be."""
    from nereus.cli.mutation.document import MutationDryRun

    if isinstance(doc, MutationDryRun):
        return any(r.would_result != "APPLIED" for r in doc.receipts)
    return doc.result in ("REJECTED", "STALE")


def not_known(env: Env, docs: Sequence[MutationDocument | MutationDryRun], *,
              wait: bool) -> None:
    """Under --wait, a shard still QUEUED means the result is not known yet: exit 6."""
    queued = [r for doc in docs for r in doc.receipts if r.evidence == "QUEUED"]
    if not wait or not queued:
        return
    key = queued[0].idempotency_key
    env.output.err.print(
        f"queued; result not known yet on {len(queued)} shard(s): durable in the Shard Log "
        f"but not applied in time (see `nereus engine status`); ask later with `nereus "
        f"command show {key}`", markup=False, highlight=False)
    raise Answered(ExitCode.RESULT_NOT_KNOWN)
