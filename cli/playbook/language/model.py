"""What a playbook is, as frozen values: variables, steps, their checks, waits and
confirmations. ``nereus.cli.playbook.language.load`` builds these from TOML; nothing here does I/O.

A step runs one ``nereus`` command (``run``, with ``--home`` and ``--json`` added by the
runner) and judges it by its exit code (``exit_codes``) and its ``post`` conditions over
the command's JSON output. ``pre`` conditions are judged before the command runs, over
variables and earlier steps' outputs. A ``wait`` step repeats its command until
``wait.until`` holds or ``wait.timeout`` passes. ``confirm`` asks the operator first;
``on_failure`` is the guidance printed when the step fails. ``for_each`` runs the step
once per element of a list (bound to ``item``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nereus.cli.playbook.language.expr import Expression
from nereus.cli.playbook.language.template import Template

VARIABLE_TYPES = ("string", "int", "duration")
# Names the runner provides; variables may not take them.
BUILTIN_NAMES = ("run_id", "home")
RESERVED_NAMES = frozenset({"steps", "output", "exit_code", "item", *BUILTIN_NAMES})
DEFAULT_COMMAND_TIMEOUT = "10m"
DEFAULT_WAIT_INTERVAL = "1s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Variable:
    name: str
    description: str
    default: str | None  # None: the variable is required
    type: str = "string"  # one of VARIABLE_TYPES
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    until: Expression
    timeout: Template  # a duration such as "5m", after variables are filled in
    interval: Template


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    id: str
    title: str
    description: str
    run: tuple[Template, ...]  # the nereus arguments, without --home/--json
    home: Template | None = None  # run against another home (variables only)
    for_each: Expression | None = None
    pre: tuple[Expression, ...] = ()
    post: tuple[Expression, ...] = ()
    wait: Wait | None = None
    confirm: Template | None = None
    on_failure: Template | None = None
    exit_codes: tuple[int, ...] = (0,)
    timeout: Template  # the deadline of one command run
    continue_on_failure: bool = False
    line: int | None = None  # where the step starts in its file


@dataclass(frozen=True, slots=True, kw_only=True)
class Playbook:
    name: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    steps: tuple[Step, ...]
    on_failure: Template | None = None
    path: Path | None = None

    def variable(self, name: str) -> Variable | None:
        return next((v for v in self.variables if v.name == name), None)

    @property
    def step_ids(self) -> tuple[str, ...]:
        return tuple(step.id for step in self.steps)
