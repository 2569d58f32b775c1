"""Building a playbook's steps from their ``[[steps]]`` tables, and checking every name
their expressions and templates use.

A name must be declared where it is used: a variable, a built-in, ``item`` in a
``for_each`` step, ``output`` and ``exit_code`` after the command ran, and ``steps.ID``
only of a step that runs earlier.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable

from nereus.cli.playbook.language.command import command_words
from nereus.cli.playbook.language.expr import Expression, ExpressionError, names_used
from nereus.cli.playbook.language.load_fields import (
    IDENTIFIER,
    PlaybookSource,
    prose_of,
    read_conditions,
    read_expression,
    read_optional_template,
    read_template,
    read_text,
)
from nereus.cli.playbook.language.model import (
    BUILTIN_NAMES,
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_WAIT_INTERVAL,
    Step,
    Variable,
    Wait,
)
from nereus.cli.playbook.language.template import Template

_STEP_KEYS = {"id", "title", "description", "run", "home", "for_each", "pre", "post", "wait",
              "confirm", "on_failure", "exit_codes", "timeout", "continue_on_failure"}
_WAIT_KEYS = {"until", "timeout", "interval"}


def read_steps(source: PlaybookSource, items: object,
               variables: tuple[Variable, ...]) -> tuple[Step, ...]:
    """The playbook's steps, in order, each checked against the steps before it."""
    if not isinstance(items, list) or not items:
        raise source.error(None, "", "no steps: add at least one [[steps]] table")
    var_names = {v.name for v in variables}
    seen: list[str] = []
    steps = []
    for position, table in enumerate(items):
        step = _step(source, position, table, var_names, tuple(seen))
        if step.id in seen:
            raise source.error(source.step_line(position, "id"), f"step {step.id!r}: ",
                               "id: another step already has this id")
        seen.append(step.id)
        steps.append(step)
    return tuple(steps)


def _step(source: PlaybookSource, position: int, table: object, var_names: set[str],
          earlier: tuple[str, ...]) -> Step:
    """One ``[[steps]]`` table as a Step; ``earlier`` are the ids of the steps before it."""
    if not isinstance(table, dict):
        raise source.error(source.step_line(position), f"step {position + 1}: ",
                           "expected a table")
    step_id = table.get("id")
    if not isinstance(step_id, str) or not IDENTIFIER.match(step_id):
        raise source.error(source.step_line(position, "id"), f"step {position + 1}: ",
                           f"id: expected a-z 0-9 _ starting with a letter, got {step_id!r}")
    where = f"step {step_id!r}: "

    def line(key: str | None = None) -> int | None:
        return source.step_line(position, key)

    for key in sorted(set(table) - _STEP_KEYS):
        raise source.error(line(key), where,
                           f"unknown key {key!r} (known: {', '.join(sorted(_STEP_KEYS))})")
    title = read_text(source, table, "title", line("title"), where, required=True)
    description = read_text(source, table, "description", line("description"), where,
                            required=False)
    run = _run(source, line("run"), where, table.get("run"))
    home = read_optional_template(source, line("home"), where, "home", table.get("home"))
    for_each = None
    if "for_each" in table:
        for_each = read_expression(source, line("for_each"), where, "for_each",
                                   table["for_each"])
    pre = read_conditions(source, line("pre"), where, "pre", table.get("pre", []))
    post = read_conditions(source, line("post"), where, "post", table.get("post", []))
    confirm = read_optional_template(source, line("confirm"), where, "confirm",
                                     prose_of(table.get("confirm")))
    on_failure = read_optional_template(source, line("on_failure"), where, "on_failure",
                                        prose_of(table.get("on_failure")))
    timeout = read_template(source, line("timeout"), where, "timeout",
                            table.get("timeout", DEFAULT_COMMAND_TIMEOUT))
    exit_codes = table.get("exit_codes", [0])
    if not isinstance(exit_codes, list) or not exit_codes or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255
            for c in exit_codes):
        raise source.error(line("exit_codes"), where,
                           "exit_codes: expected a list of exit statuses such as [0] or [0, 1]")
    keep_going = table.get("continue_on_failure", False)
    if not isinstance(keep_going, bool):
        raise source.error(line("continue_on_failure"), where,
                           "continue_on_failure: expected true or false")
    wait = _wait(source, line, where, table.get("wait"))
    step = Step(id=step_id, title=title.strip(), description=description.strip(), run=run,
                home=home, for_each=for_each, pre=pre, post=post, wait=wait, confirm=confirm,
                on_failure=on_failure, exit_codes=tuple(exit_codes), timeout=timeout,
                continue_on_failure=keep_going, line=line())
    _check_step_names(source, line, where, step, var_names | set(BUILTIN_NAMES), earlier)
    return step


def _check_step_names(source: PlaybookSource, line: Callable[[str], int | None], where: str,
                      step: Step, context: set[str], earlier: tuple[str, ...]) -> None:
    """Check the names each of the step's fields uses, in the order a reader meets them:
    ``context`` (variables and built-ins) everywhere, ``item`` in a for_each step's run and
    after, ``output`` and ``exit_code`` only after the command ran."""
    item = {"item"} if step.for_each is not None else set()
    check_names(source, line("home"), where, "home", template_names([step.home]), context,
                earlier=None)
    check_names(source, line("timeout"), where, "timeout", template_names([step.timeout]),
                context, earlier=None)
    if step.wait is not None:
        check_names(source, line("wait"), where, "wait",
                    template_names([step.wait.timeout, step.wait.interval]), context,
                    earlier=None)
    if step.for_each is not None:
        check_names(source, line("for_each"), where, "for_each",
                    expression_names([step.for_each]), context, earlier=earlier)
    check_names(source, line("pre"), where, "pre", expression_names(step.pre), context,
                earlier=earlier)
    check_names(source, line("confirm"), where, "confirm", template_names([step.confirm]),
                context, earlier=earlier)
    check_names(source, line("run"), where, "run", template_names(step.run), context | item,
                earlier=earlier)
    after = context | item | {"output", "exit_code"}
    check_names(source, line("post"), where, "post", expression_names(step.post), after,
                earlier=earlier)
    if step.wait is not None:
        check_names(source, line("wait"), where, "wait.until",
                    expression_names([step.wait.until]), after, earlier=earlier)
    check_names(source, line("on_failure"), where, "on_failure",
                template_names([step.on_failure]), after, earlier=earlier)


def _run(source: PlaybookSource, line: int | None, where: str,
         value: object) -> tuple[Template, ...]:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise source.error(line, where, f"run: {exc}") from None
    elif isinstance(value, list) and all(isinstance(w, str) for w in value):
        words = list(value)
    else:
        raise source.error(line, where, "run: expected the nereus arguments as a list of "
                           "strings (or one string split like a shell line)")
    if not words:
        raise source.error(line, where, "run: no command")
    if words[0] == "nereus":
        raise source.error(line, where, "run: leave out `nereus` itself; the runner adds "
                           "`nereus --home HOME --json`")
    if words[0] in ("playbook",):
        raise source.error(line, where, "run: a playbook cannot run playbooks")
    run = tuple(read_template(source, line, where, "run", word) for word in words)
    try:
        command_words(run)
    except ExpressionError as exc:
        raise source.error(line, where, f"run: {exc.message}") from None
    return run


def _wait(source: PlaybookSource, line: Callable[[str], int | None], where: str,
          value: object) -> Wait | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise source.error(line("wait"), where, "wait: expected a table with until, timeout "
                           "(and interval)")
    for key in sorted(set(value) - _WAIT_KEYS):
        raise source.error(line(key), where, f"wait: unknown key {key!r} (known: "
                           f"{', '.join(sorted(_WAIT_KEYS))})")
    if "until" not in value or "timeout" not in value:
        raise source.error(line("wait"), where, "wait: needs until = \"CONDITION\" and "
                           "timeout = \"DURATION\" (every wait has a deadline)")
    return Wait(until=read_expression(source, line("until"), where, "wait.until",
                                      value["until"]),
                timeout=read_template(source, line("timeout"), where, "wait.timeout",
                                      value["timeout"]),
                interval=read_template(source, line("interval"), where, "wait.interval",
                                       value.get("interval", DEFAULT_WAIT_INTERVAL)))


def template_names(templates: Iterable[Template | None]) -> list[tuple[str, str | None]]:
    """The (root, first key) of every name the templates' holes use."""
    return [pair for t in templates if t is not None for pair in t.names()]


def expression_names(expressions: Iterable[Expression]) -> list[tuple[str, str | None]]:
    """The (root, first key) of every name the expressions use."""
    return [pair for e in expressions for pair in names_used(e)]


def check_names(source: PlaybookSource, line: int | None, where: str, key: str,
                used: list[tuple[str, str | None]], allowed: set[str], *,
                earlier: tuple[str, ...] | None) -> None:
    """Refuse a name in ``used`` that is not in ``allowed``, or ``steps.ID`` of a step not
    in ``earlier`` (None: no steps.* at all)."""
    for root, first in used:
        if root == "steps":
            if earlier is None:
                raise source.error(line, where, f"{key}: may use variables only, not steps.*")
            if first is None:
                raise source.error(line, where, f"{key}: name a step's output as steps.ID")
            if first not in earlier:
                which = (f"the steps before it are {', '.join(earlier)}" if earlier
                         else "no step runs before it")
                raise source.error(line, where, f"{key}: steps.{first} is not an earlier step "
                                   f"({which})")
            continue
        if root not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            hint = ""
            if root in ("output", "exit_code"):
                hint = " (output and exit_code exist only in post, wait.until and on_failure)"
            elif root == "item":
                hint = " (item exists only in a for_each step's run, post and wait)"
            raise source.error(line, where, f"{key}: unknown name {root!r}{hint}; known "
                               f"here: {known}")
