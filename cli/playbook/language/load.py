"""Reading a playbook from TOML, with errors that name the file, the line, the step and
the field.

Everything that can be checked before a run is checked here: unknown keys (a typo in a
check must not silently disable it), types, step ids, every expression and template hole,
and every name they use (a variable that is not declared, or ``steps.ID`` of a step that
does not run earlier). A playbook that loads can only fail at run time because of what
the commands answer.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nereus.cli.playbook.language.command import command_words
from nereus.cli.playbook.language.expr import (
    FUNCTIONS,
    KEYWORDS,
    Expression,
    ExpressionError,
    names_used,
    parse,
)
from nereus.cli.playbook.language.model import (
    BUILTIN_NAMES,
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_WAIT_INTERVAL,
    RESERVED_NAMES,
    VARIABLE_TYPES,
    Playbook,
    Step,
    Variable,
    Wait,
)
from nereus.cli.playbook.language.plan import convert
from nereus.cli.playbook.language.template import Template, parse_template
from nereus.errors import UsageError

IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
PLAYBOOK_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_TOP_KEYS = {"name", "title", "description", "on_failure", "vars", "steps"}
_VAR_KEYS = {"description", "default", "type", "choices"}
_STEP_KEYS = {"id", "title", "description", "run", "home", "for_each", "pre", "post", "wait",
              "confirm", "on_failure", "exit_codes", "timeout", "continue_on_failure"}
_WAIT_KEYS = {"until", "timeout", "interval"}


class PlaybookError(UsageError):
    """A playbook file that cannot be used as written; the message says where."""


class _Source:
    """The playbook's text, to turn a table and key into a line number."""

    def __init__(self, text: str, origin: str) -> None:
        self.lines = text.splitlines()
        self.origin = origin
        self.step_headers = [i for i, line in enumerate(self.lines)
                             if re.match(r"^\s*\[\[\s*steps\s*\]\]", line)]

    def _find_key(self, start: int, stop: int, key: str) -> int | None:
        pattern = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        for index in range(start, stop):
            if pattern.match(self.lines[index]):
                return index + 1
        return None

    def top_line(self, key: str) -> int | None:
        first_table = next((i for i, line in enumerate(self.lines)
                            if line.lstrip().startswith("[")), len(self.lines))
        return self._find_key(0, first_table, key)

    def var_line(self, name: str, key: str | None) -> int | None:
        header = re.compile(r"^\s*\[\s*vars\s*\.\s*\"?" + re.escape(name) + r"\"?\s*\]")
        for index, line in enumerate(self.lines):
            if header.match(line):
                if key is None:
                    return index + 1
                stop = next((i for i in range(index + 1, len(self.lines))
                             if self.lines[i].lstrip().startswith("[")), len(self.lines))
                return self._find_key(index + 1, stop, key) or index + 1
        # an inline table: vars.NAME = { ... } or NAME = { ... } inside [vars]
        return self._find_key(0, len(self.lines), name)

    def step_line(self, position: int, key: str | None = None) -> int | None:
        if position >= len(self.step_headers):
            return None
        start = self.step_headers[position]
        stop = (self.step_headers[position + 1] if position + 1 < len(self.step_headers)
                else len(self.lines))
        for index in range(start + 1, stop):  # a following top-level table ends the step
            stripped = self.lines[index].lstrip()
            if stripped.startswith("[") and not re.match(r"^\[\s*steps\s*\.", stripped):
                stop = index
                break
        if key is None:
            return start + 1
        return self._find_key(start + 1, stop, key) or start + 1

    def error(self, line: int | None, where: str, message: str) -> PlaybookError:
        at = f"{self.origin}:{line}" if line else self.origin
        return PlaybookError(f"{at}: {where}{message}")


def load_playbook(text: str, *, origin: str, name: str | None = None,
                  path: Path | None = None) -> Playbook:
    """Parse playbook ``text`` read from ``origin`` (a path, for messages). ``name``, when
    given, is what the file name says the playbook is called; a different ``name = ...``
    inside is an error."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)"
        raise PlaybookError(f"{origin}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise PlaybookError(f"{origin}: arrays or inline tables are nested too deeply for a "
                            "playbook") from None
    source = _Source(text, origin)
    for key in sorted(set(data) - _TOP_KEYS):
        raise source.error(source.top_line(key), "", f"unknown key {key!r} (known: "
                           f"{', '.join(sorted(_TOP_KEYS))})")
    declared = data.get("name", name)
    if not isinstance(declared, str) or not PLAYBOOK_NAME.match(declared):
        raise source.error(source.top_line("name"), "", "name: expected 1-64 of a-z 0-9 . _ - "
                           f"starting with a letter or digit, got {declared!r}")
    if name is not None and declared != name:
        raise source.error(source.top_line("name"), "", f"name = {declared!r} but the file "
                           f"is named {name!r}: make them agree")
    title = _text(source, data, "title", source.top_line("title"), "", required=False)
    description = _text(source, data, "description", source.top_line("description"), "",
                        required=True)
    variables = _variables(source, data.get("vars", {}))
    steps = _steps(source, data.get("steps"), variables)
    var_names = {v.name for v in variables}
    on_failure = None
    if "on_failure" in data:
        on_failure = _template(source, source.top_line("on_failure"), "", "on_failure",
                               _prose_of(data["on_failure"]))
        _check_names(source, source.top_line("on_failure"), "", "on_failure",
                     _template_names([on_failure]), var_names | set(BUILTIN_NAMES),
                     earlier=None)
    return Playbook(name=declared, title=title or description.strip().splitlines()[0],
                    description=description.strip(), variables=variables, steps=steps,
                    on_failure=on_failure, path=path)


def prose(text: str) -> str:
    """Text as written in a TOML multi-line string, reflowed: lines of one paragraph are
    joined with spaces, paragraphs (blank lines) become newlines."""
    paragraphs = [" ".join(line.strip() for line in block.splitlines() if line.strip())
                  for block in re.split(r"\n\s*\n", text.strip())]
    return "\n".join(p for p in paragraphs if p)


def _text(source: _Source, table: dict[str, Any], key: str, line: int | None, where: str,
          *, required: bool) -> str:
    value = table.get(key)
    if value is None:
        if required:
            raise source.error(line, where, f"{key}: missing (say what this does and why)")
        return ""
    if not isinstance(value, str):
        raise source.error(line, where, f"{key}: expected a string, got {type(value).__name__}")
    return prose(value)


def _variables(source: _Source, table: Any) -> tuple[Variable, ...]:
    if not isinstance(table, dict):
        raise source.error(source.top_line("vars"), "", "vars: expected a table of variables")
    out = []
    for name, spec in table.items():
        where = f"variable {name!r}: "
        if not IDENTIFIER.match(name) or name in KEYWORDS or name in FUNCTIONS or \
                name in RESERVED_NAMES:
            raise source.error(source.var_line(name, None), where,
                               "names are a-z 0-9 _ starting with a letter, and not one of "
                               + ", ".join(sorted(KEYWORDS | FUNCTIONS | RESERVED_NAMES)))
        if not isinstance(spec, dict):
            raise source.error(source.var_line(name, None), where,
                               "expected a table with description (and default, type, choices)")
        for key in sorted(set(spec) - _VAR_KEYS):
            raise source.error(source.var_line(name, key), where,
                               f"unknown key {key!r} (known: {', '.join(sorted(_VAR_KEYS))})")
        description = _text(source, spec, "description", source.var_line(name, "description"),
                            where, required=True)
        kind = spec.get("type", "string")
        if kind not in VARIABLE_TYPES:
            raise source.error(source.var_line(name, "type"), where,
                               f"type = {kind!r}; expected one of {', '.join(VARIABLE_TYPES)}")
        default = spec.get("default")
        if default is not None:
            if isinstance(default, bool) or not isinstance(default, str | int):
                raise source.error(source.var_line(name, "default"), where,
                                   "default: expected a string or an integer")
            default = str(default)
        choices = spec.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise source.error(source.var_line(name, "choices"), where,
                               "choices: expected a list of strings")
        variable = Variable(name=name, description=description.strip(), default=default,
                            type=kind, choices=tuple(choices))
        if default is not None:
            try:
                convert(variable, default)
            except UsageError as exc:
                raise source.error(source.var_line(name, "default"), where,
                                   f"default: {exc.message}") from None
        out.append(variable)
    return tuple(out)


def _steps(source: _Source, items: Any, variables: tuple[Variable, ...]) -> tuple[Step, ...]:
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


def _step(source: _Source, position: int, table: Any, var_names: set[str],
          earlier: tuple[str, ...]) -> Step:
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
    title = _text(source, table, "title", line("title"), where, required=True)
    description = _text(source, table, "description", line("description"), where,
                        required=False)
    run = _run(source, line("run"), where, table.get("run"))
    home = _optional_template(source, line("home"), where, "home", table.get("home"))
    for_each = None
    if "for_each" in table:
        for_each = _expression(source, line("for_each"), where, "for_each", table["for_each"])
    pre = _conditions(source, line("pre"), where, "pre", table.get("pre", []))
    post = _conditions(source, line("post"), where, "post", table.get("post", []))
    confirm = _optional_template(source, line("confirm"), where, "confirm",
                                 _prose_of(table.get("confirm")))
    on_failure = _optional_template(source, line("on_failure"), where, "on_failure",
                                    _prose_of(table.get("on_failure")))
    timeout = _template(source, line("timeout"), where, "timeout",
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

    item = {"item"} if for_each is not None else set()
    context = var_names | set(BUILTIN_NAMES)
    _check_names(source, line("home"), where, "home", _template_names([home]), context,
                 earlier=None)
    _check_names(source, line("timeout"), where, "timeout", _template_names([timeout]),
                 context, earlier=None)
    if wait is not None:
        _check_names(source, line("wait"), where, "wait",
                     _template_names([wait.timeout, wait.interval]), context, earlier=None)
    if for_each is not None:
        _check_names(source, line("for_each"), where, "for_each", _expr_names([for_each]),
                     context, earlier=earlier)
    _check_names(source, line("pre"), where, "pre", _expr_names(pre), context, earlier=earlier)
    _check_names(source, line("confirm"), where, "confirm", _template_names([confirm]), context,
                 earlier=earlier)
    _check_names(source, line("run"), where, "run", _template_names(run), context | item,
                 earlier=earlier)
    after = context | item | {"output", "exit_code"}
    _check_names(source, line("post"), where, "post", _expr_names(post), after, earlier=earlier)
    if wait is not None:
        _check_names(source, line("wait"), where, "wait.until", _expr_names([wait.until]), after,
                     earlier=earlier)
    _check_names(source, line("on_failure"), where, "on_failure",
                 _template_names([on_failure]), after, earlier=earlier)
    return Step(id=step_id, title=title.strip(), description=description.strip(), run=run,
                home=home, for_each=for_each, pre=pre, post=post, wait=wait, confirm=confirm,
                on_failure=on_failure, exit_codes=tuple(exit_codes), timeout=timeout,
                continue_on_failure=keep_going, line=line())


def _prose_of(value: Any) -> Any:
    return prose(value) if isinstance(value, str) else value


def _run(source: _Source, line: int | None, where: str, value: Any) -> tuple[Template, ...]:
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
    run = tuple(_template(source, line, where, "run", word) for word in words)
    try:
        command_words(run)
    except ExpressionError as exc:
        raise source.error(line, where, f"run: {exc.message}") from None
    return run


def _template(source: _Source, line: int | None, where: str, key: str, value: Any) -> Template:
    if not isinstance(value, str):
        raise source.error(line, where, f"{key}: expected a string")
    try:
        return parse_template(value)
    except ExpressionError as exc:
        raise source.error(line, where, f"{key}: {exc.message}") from None


def _optional_template(source: _Source, line: int | None, where: str, key: str,
                       value: Any) -> Template | None:
    return None if value is None else _template(source, line, where, key, value)


def _expression(source: _Source, line: int | None, where: str, key: str,
                value: Any) -> Expression:
    if not isinstance(value, str):
        raise source.error(line, where, f"{key}: expected an expression in a string")
    try:
        return parse(value)
    except ExpressionError as exc:
        raise source.error(line, where, f"{key}: {exc.message}") from None


def _conditions(source: _Source, line: int | None, where: str, key: str,
                value: Any) -> tuple[Expression, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise source.error(line, where, f"{key}: expected a list of conditions")
    return tuple(_expression(source, line, where, key, item) for item in value)


def _wait(source: _Source, line: Any, where: str, value: Any) -> Wait | None:
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
    return Wait(until=_expression(source, line("until"), where, "wait.until", value["until"]),
                timeout=_template(source, line("timeout"), where, "wait.timeout",
                                  value["timeout"]),
                interval=_template(source, line("interval"), where, "wait.interval",
                                   value.get("interval", DEFAULT_WAIT_INTERVAL)))


def _template_names(templates: Iterable[Template | None]) -> list[tuple[str, str | None]]:
    return [pair for t in templates if t is not None for pair in t.names()]


def _expr_names(expressions: Iterable[Expression]) -> list[tuple[str, str | None]]:
    return [pair for e in expressions for pair in names_used(e)]


def _check_names(source: _Source, line: int | None, where: str, key: str,
                 used: list[tuple[str, str | None]], allowed: set[str], *,
                 earlier: tuple[str, ...] | None) -> None:
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
