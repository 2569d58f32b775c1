"""What ``nereus playbook list|show|run`` print with ``--json``, as typed values, and the
check verdicts the run journal keeps.

``list`` prints one ``PlaybookRow`` per playbook; ``show`` a ``PlaybookDefinition`` (the
playbook as written); ``run`` a ``RunReport`` (each step's ``StepResult``), or with
``--dry-run`` a ``DryRunPlan`` (each step as the plan fills it in, ``PlannedStepView``).
The man pages' JSON sections come from these fields (``nereus.cli.json_keys.typed``).
Pure: no I/O, so the planner and the journal can use them.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from nereus.cli.playbook.language.expr import Json
from nereus.cli.playbook.language.model import Step, Variable

# a variable's typed value: an ``int`` variable's is an int, the others' a string
VariableValue = str | int


class CheckResult(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict of one condition (``pre``, ``post``, ``wait.until``); the journal keeps
    these too, so unknown keys in an older line are ignored rather than refused."""

    condition: str
    ok: bool
    detail: str  # "holds", or why not


StepStatus = Literal["ok", "failed", "done_before", "not_run", "declined",
                     "needs_confirmation"]


class StepResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What became of one step in this run (or an earlier one, when resumed)."""

    id: str
    title: str
    ok: bool | None  # None: not judged in this run or any earlier one
    status: StepStatus
    args: list[str] = []
    home: str | None = None
    exit_code: int | None = None
    checks: list[CheckResult] = []
    detail: str = ""
    polls: int = 0
    elapsed_ms: int = 0
    guidance: str | None = None  # the on_failure text, when the step failed
    output: Json = None  # the command's JSON document (a list of them for for_each)


class RunReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``playbook run``: how the run ended and every step's result."""

    name: str
    run_id: str
    ok: bool
    exit_code: int
    resumed: bool
    journal: str
    variables: dict[str, VariableValue]
    stopped_at: str | None = None  # the step the run stopped at
    stop_reason: str | None = None  # failed | declined | needs_confirmation
    detail: str = ""
    steps: list[StepResult]
    path: str  # where the playbook was read from


class PlaybookRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One playbook of ``playbook list``; ``error`` says why one cannot be used."""

    name: str
    title: str
    origin: str  # shipped | home
    shadows_shipped: bool
    path: str
    required_vars: list[str]
    error: str | None


class VariableDefinition(msgspec.Struct, frozen=True, kw_only=True,
                         forbid_unknown_fields=True):
    name: str
    description: str
    default: str | None
    required: bool
    type: str  # string | int | duration
    choices: list[str]


class WaitDefinition(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    until: str
    timeout: str
    interval: str


class StepDefinition(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A step as the playbook writes it (templates and conditions as their source)."""

    id: str
    title: str
    description: str
    run: list[str]
    home: str | None
    for_each: str | None
    pre: list[str]
    post: list[str]
    wait: WaitDefinition | None
    confirm: str | None
    on_failure: str | None
    exit_codes: list[int]
    timeout: str
    continue_on_failure: bool


class PlaybookDefinition(msgspec.Struct, frozen=True, kw_only=True,
                         forbid_unknown_fields=True):
    """``playbook show``: a playbook's description, variables and steps, as written."""

    name: str
    title: str
    description: str
    origin: str  # shipped | home | file
    path: str
    shadows_shipped: bool
    on_failure: str | None
    variables: list[VariableDefinition]
    steps: list[StepDefinition]


class PlannedWait(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    until: str
    timeout_ms: int | None
    interval_ms: int | None


class PlannedStepView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A step of the plan: holes filled from the variables and from the read-only steps
    the dry run ran (``<steps.take.checkpoint_id>`` where they cannot be, and
    ``not_known`` says why), durations in milliseconds."""

    index: int  # from 1
    id: str
    title: str
    description: str
    run: list[str]
    # every command line the run would run: one, or one per item of a for_each whose items
    # are known
    commands: list[list[str]]
    read: bool  # the dry run ran this read-only step: later steps' holes use its output
    not_known: list[str]  # why a hole of this step is still <...>, one line a step it needs
    home: str
    for_each: str | None
    pre: list[str]
    post: list[str]
    exit_codes: list[int]
    timeout_ms: int
    wait: PlannedWait | None
    confirm: str | None
    continue_on_failure: bool
    on_failure: str | None
    done_before: bool  # completed by the run --resume continues: it is skipped


class DryRunPlan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``playbook run --dry-run``: the whole plan; nothing is changed, nothing is written
    (only read-only steps whose output the plan needs run, ``read``)."""

    name: str
    title: str
    dry_run: bool = True
    path: str
    home: str
    variables: dict[str, VariableValue]
    journal: str
    resume_from: str | None  # with --resume: the first step the run would take
    read: list[str]  # the read-only steps the dry run ran to fill in later steps' holes
    steps: list[PlannedStepView]


def variable_definition(variable: Variable) -> VariableDefinition:
    return VariableDefinition(name=variable.name, description=variable.description,
                              default=variable.default, required=variable.required,
                              type=variable.type, choices=list(variable.choices))


def step_definition(step: Step) -> StepDefinition:
    return StepDefinition(
        id=step.id, title=step.title, description=step.description,
        run=[w.source for w in step.run], home=step.home.source if step.home else None,
        for_each=step.for_each.source if step.for_each else None,
        pre=[c.source for c in step.pre], post=[c.source for c in step.post],
        wait=None if step.wait is None else WaitDefinition(
            until=step.wait.until.source, timeout=step.wait.timeout.source,
            interval=step.wait.interval.source),
        confirm=step.confirm.source if step.confirm else None,
        on_failure=step.on_failure.source if step.on_failure else None,
        exit_codes=list(step.exit_codes), timeout=step.timeout.source,
        continue_on_failure=step.continue_on_failure)
