"""From a playbook and the operator's ``--var K=V`` to a plan, and the judgement of a
step's result; pure functions, so a dry run shows exactly what a run would do.

The plan fixes everything that depends on variables alone: the variables' typed values,
each step's home, command deadline, wait timeout and interval. What depends on earlier
steps' outputs (``{steps.take.checkpoint_id}``) is filled in at run time from the same
templates; a dry run fills in those of the read-only steps it runs
(``nereus.cli.playbook.language.dry_reads``) and shows the others as
``<steps.take.checkpoint_id>``, saying why.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nereus.cli.playbook.language.command import command_words, render_command, render_word
from nereus.cli.playbook.language.documents import (
    CheckResult,
    DryRunPlan,
    PlannedStepView,
    PlannedWait,
)
from nereus.cli.playbook.language.dry_reads import steps_used
from nereus.cli.playbook.language.expr import (
    Expression,
    ExpressionError,
    Json,
    evaluate,
    explain,
    truthy,
)
from nereus.cli.playbook.language.model import Playbook, Step, Variable
from nereus.cli.playbook.language.template import Template, known, render, render_known
from nereus.errors import UsageError
from nereus.timespec import parse_duration_ms


def convert(variable: Variable, raw: str) -> Json:
    """The typed value of ``raw`` for ``variable`` (UsageError naming it when wrong)."""
    if variable.choices and raw not in variable.choices:
        raise UsageError(f"variable {variable.name}: {raw!r} is not one of "
                         f"{', '.join(variable.choices)}")
    if variable.type == "int":
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"variable {variable.name}: {raw!r} is not an integer") from None
    if variable.type == "duration":
        parse_duration_ms(raw, field=f"variable {variable.name}")
    return raw


def parse_assignments(pairs: Sequence[str]) -> dict[str, str]:
    """``["lane=a", "reason=b c"]`` -> ``{"lane": "a", "reason": "b c"}`` (K=V, once each)."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--var {pair!r}: expected NAME=VALUE")
        if name in out:
            raise UsageError(f"--var {name} is given twice")
        out[name] = value
    return out


def check_variable_names(playbook: Playbook, given: Mapping[str, str]) -> None:
    """Every ``--var`` must name a variable the playbook declares: a usage error listing the
    unknown ones, what it takes and the likely intended name."""
    names = [v.name for v in playbook.variables]
    unknown = sorted(set(given) - set(names))
    if not unknown:
        return
    guesses = [f"{name} -> {close[0]}" for name in unknown
               if (close := difflib.get_close_matches(name, names, n=1, cutoff=0.6))]
    known = ", ".join(names) or "none"
    raise UsageError(f"playbook {playbook.name} has no variable(s) "
                     f"{', '.join(unknown)}"
                     + (f" (did you mean {'; '.join(guesses)}?)" if guesses else ""),
                     hint=f"its variables: {known} (`nereus playbook show {playbook.name}`)")


def resolve_variables(playbook: Playbook, given: Mapping[str, str]) -> dict[str, Json]:
    """Every variable's value: given, else its default; unknown or missing ones are usage
    errors that list what the playbook takes."""
    check_variable_names(playbook, given)
    missing = [v for v in playbook.variables if v.required and v.name not in given]
    if missing:
        listing = "; ".join(f"{v.name} ({v.description})" for v in missing)
        raise UsageError(f"playbook {playbook.name} needs variable(s): {listing}",
                         hint="pass " + " ".join(f"--var {v.name}=VALUE" for v in missing))
    values: dict[str, Json] = {}
    for variable in playbook.variables:
        raw = given.get(variable.name, variable.default)
        assert raw is not None
        values[variable.name] = convert(variable, raw)
    return values


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedStep:
    step: Step
    index: int
    home: str  # the home the command runs against
    timeout_ms: int  # deadline of one command run
    wait_timeout_ms: int | None
    wait_interval_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    playbook: Playbook
    variables: dict[str, Json]
    run_id: str
    home: str
    steps: tuple[PlannedStep, ...]

    def base_scope(self) -> dict[str, Json]:
        """Names every expression of this run sees: variables, run_id, home."""
        return {**self.variables, "run_id": self.run_id, "home": self.home}

    def scope(self, outputs: Mapping[str, Json], **extra: Json) -> dict[str, Json]:
        return {**self.base_scope(), "steps": dict(outputs), **extra}


def _duration(template: Template, scope: Mapping[str, Json], what: str) -> int:
    try:
        text = render(template, scope)
    except ExpressionError as exc:
        raise UsageError(f"{what}: {exc.message}") from None
    return parse_duration_ms(text, field=what)


def make_plan(playbook: Playbook, variables: dict[str, Json], *, run_id: str,
              home: str) -> Plan:
    """Resolve what depends on variables only; UsageError if a duration is not one."""
    scope = {**variables, "run_id": run_id, "home": home}
    steps = []
    for index, step in enumerate(playbook.steps):
        where = f"step {step.id}"
        try:
            step_home = home if step.home is None else render(step.home, scope)
        except ExpressionError as exc:
            raise UsageError(f"{where}: home: {exc.message}") from None
        wait_timeout = wait_interval = None
        if step.wait is not None:
            wait_timeout = _duration(step.wait.timeout, scope, f"{where}: wait.timeout")
            wait_interval = max(1, _duration(step.wait.interval, scope,
                                             f"{where}: wait.interval"))
        steps.append(PlannedStep(step=step, index=index, home=step_home,
                                 timeout_ms=_duration(step.timeout, scope, f"{where}: timeout"),
                                 wait_timeout_ms=wait_timeout, wait_interval_ms=wait_interval))
    return Plan(playbook=playbook, variables=variables, run_id=run_id, home=home,
                steps=tuple(steps))


# -- judging a step ----------------------------------------------------------------------------


def judge(conditions: Sequence[Expression], scope: Mapping[str, Json]) -> list[CheckResult]:
    """The verdicts of ``conditions`` in order, up to and including the first false one
    (later conditions usually build on earlier ones: ``output.running == true`` before
    ``all(output.shards, "caught_up")``). One that cannot be evaluated is false, with why."""
    out = []
    for condition in conditions:
        try:
            ok = truthy(evaluate(condition, scope))
        except ExpressionError as exc:
            out.append(CheckResult(condition=condition.source, ok=False, detail=exc.message))
            break
        out.append(CheckResult(condition=condition.source, ok=ok,
                               detail="holds" if ok else explain(condition, scope)))
        if not ok:
            break
    return out


def render_args(step: Step, scope: Mapping[str, Json]) -> list[str]:
    """The command's arguments with every hole filled (ExpressionError if one cannot be),
    laid out so that no value can be read as an option
    (:mod:`nereus.cli.playbook.language.command`)."""
    return render_command(command_words(step.run), scope)


def items_of(step: Step, scope: Mapping[str, Json]) -> list[Json]:
    """What a ``for_each`` step iterates over (ExpressionError unless it is a list)."""
    assert step.for_each is not None
    value = evaluate(step.for_each, scope)
    if not isinstance(value, list):
        raise ExpressionError(f"for_each `{step.for_each.source}` is not a list")
    return value


def guidance(step: Step, playbook: Playbook, scope: Mapping[str, Json]) -> str | None:
    """The on_failure text for ``step`` (the playbook's own when the step has none), with
    what is known filled in."""
    parts = []
    for template in (step.on_failure, playbook.on_failure):
        if template is not None:
            try:
                parts.append(render_known(template, scope).strip())
            except ExpressionError:
                parts.append(template.source.strip())
    return "\n".join(parts) or None


# -- what a dry run shows ----------------------------------------------------------------------


def _known_command(step: Step, scope: Mapping[str, Json]) -> list[str]:
    """The command line a run would use, holes filled where they can be."""
    try:
        words = command_words(step.run)
    except ExpressionError as exc:
        return [*(w.source for w in step.run), f"(cannot run: {exc.message})"]
    out = []
    for word in words:
        try:
            out.append(render_word(word, scope, known=True))
        except ExpressionError as exc:
            out.append(f"{word.source} (cannot be filled in: {exc.message})")
    return out


def _known_items(step: Step, scope: Mapping[str, Json]) -> list[Json] | None:
    """A ``for_each`` step's items when what they come from is known, else None."""
    if step.for_each is None or not known(step.for_each, scope):
        return None
    try:
        return items_of(step, scope)
    except ExpressionError:
        return None


def describe_step(plan: Plan, planned: PlannedStep, *, done_before: bool = False,
                  outputs: Mapping[str, Json] | None = None,
                  unread: Mapping[str, str] | None = None) -> PlannedStepView:
    """One step of the plan as a dry run shows it, holes filled from the variables and
    ``outputs`` (the steps the dry run read, or a resumed run's); ``unread`` says why a
    step it needs has no output."""
    step = planned.step
    outputs = outputs or {}
    scope = plan.scope(outputs)

    def filled(template: Template | None) -> str | None:
        if template is None:
            return None
        try:
            return render_known(template, scope)
        except ExpressionError as exc:
            return f"{template.source} (cannot be filled in: {exc.message})"

    run = _known_command(step, scope)
    items = _known_items(step, scope)
    commands = [run] if items is None else [_known_command(step, {**scope, "item": item})
                                            for item in items]
    waiting_on = [used for used in steps_used(step) if used not in outputs]
    not_known = [(unread or {}).get(used) or f"step {used} has not run yet"
                 for used in waiting_on]
    return PlannedStepView(
        index=planned.index + 1, id=step.id, title=step.title, description=step.description,
        run=run, commands=commands, read=step.id in outputs and not done_before,
        not_known=not_known, home=planned.home,
        for_each=step.for_each.source if step.for_each else None,
        pre=[c.source for c in step.pre], post=[c.source for c in step.post],
        exit_codes=list(step.exit_codes), timeout_ms=planned.timeout_ms,
        wait=None if step.wait is None else PlannedWait(
            until=step.wait.until.source, timeout_ms=planned.wait_timeout_ms,
            interval_ms=planned.wait_interval_ms),
        confirm=filled(step.confirm), continue_on_failure=step.continue_on_failure,
        on_failure=filled(step.on_failure), done_before=done_before)


def dry_run_plan(plan: Plan, *, path: str, journal: str, start_index: int,
                 resuming: bool, outputs: Mapping[str, Json] | None = None,
                 unread: Mapping[str, str] | None = None) -> DryRunPlan:
    """The whole plan as ``--dry-run`` prints it; with ``resuming``, the steps before
    ``start_index`` were completed by the run being resumed. ``outputs``: what the dry run
    read (and a resumed run's outputs); ``unread``: why a needed step was not read."""
    outputs = outputs or {}
    steps = [describe_step(plan, planned, done_before=planned.index < start_index,
                           outputs=outputs, unread=unread)
             for planned in plan.steps]
    return DryRunPlan(
        name=plan.playbook.name, title=plan.playbook.title, path=path, home=plan.home,
        variables=dict(plan.variables), journal=journal,
        resume_from=steps[start_index].id if resuming and start_index < len(steps) else None,
        read=[step.id for step in steps if step.read], steps=steps)
