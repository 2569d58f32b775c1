"""What a dry run reads to show the commands a run would run: the read-only steps whose
output later steps' holes need (``nereus.cli.playbook.language.dry_reads``), run in order
as a run would run them, each under a short deadline."""

from __future__ import annotations

from collections.abc import Mapping

from nereus.cli.playbook.invoke import Invoke
from nereus.cli.playbook.language.dry_reads import steps_needed, why_not_read
from nereus.cli.playbook.language.expr import ExpressionError, Json
from nereus.cli.playbook.language.plan import Plan, render_args

READ_TIMEOUT_MS = 30_000  # a listing that takes longer is left unread, not waited for


def read_ahead(plan: Plan, invoke: Invoke, *, start_index: int = 0,
               outputs: Mapping[str, Json] | None = None,
               ) -> tuple[dict[str, Json], dict[str, str]]:
    """The outputs later steps need that can be read now (with ``outputs``, a resumed
    run's, already known), and for each needed step left unread, why."""
    needed = steps_needed(plan.playbook)
    known: dict[str, Json] = dict(outputs or {})
    unread: dict[str, str] = {}
    for planned in plan.steps:
        step = planned.step
        if step.id not in needed or step.id in known or planned.index < start_index:
            continue
        why = why_not_read(step)
        if why is None:
            why, output = _read(plan, planned.index, invoke, known)
            if why is None:
                known[step.id] = output
                continue
        unread[step.id] = why
    return known, unread


def _read(plan: Plan, index: int, invoke: Invoke,
          known: dict[str, Json]) -> tuple[str | None, Json]:
    """(None, the step's output), or (why it could not be read, None)."""
    planned = plan.steps[index]
    step = planned.step
    try:
        args = render_args(step, plan.scope(known))
    except ExpressionError as exc:
        return f"step {step.id}'s command cannot be filled in yet: {exc.message}", None
    invocation = invoke(args, home=planned.home,
                        timeout_ms=min(planned.timeout_ms, READ_TIMEOUT_MS))
    if invocation.exit_code not in step.exit_codes:
        return (f"step {step.id} could not be read now: `nereus {' '.join(args)}` exited "
                f"{invocation.exit_code}: {invocation.error_text()}"), None
    return None, invocation.output
