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
import tomllib
from pathlib import Path

from nereus.cli.playbook.language.expr import FUNCTIONS, KEYWORDS
from nereus.cli.playbook.language.load_fields import (
    IDENTIFIER,
    PlaybookError,
    PlaybookSource,
    prose,
    prose_of,
    read_template,
    read_text,
)
from nereus.cli.playbook.language.load_steps import check_names, read_steps, template_names
from nereus.cli.playbook.language.model import (
    BUILTIN_NAMES,
    RESERVED_NAMES,
    VARIABLE_TYPES,
    Playbook,
    Variable,
)
from nereus.cli.playbook.language.plan import convert
from nereus.errors import UsageError

# what the loader answers with, wherever it is defined
__all__ = ["PLAYBOOK_NAME", "PlaybookError", "load_playbook", "prose"]

PLAYBOOK_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_TOP_KEYS = {"name", "title", "description", "on_failure", "vars", "steps"}
_VAR_KEYS = {"description", "default", "type", "choices"}


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
    source = PlaybookSource(text, origin)
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
    title = read_text(source, data, "title", source.top_line("title"), "", required=False)
    description = read_text(source, data, "description", source.top_line("description"), "",
                            required=True)
    variables = _variables(source, data.get("vars", {}))
    steps = read_steps(source, data.get("steps"), variables)
    var_names = {v.name for v in variables}
    on_failure = None
    if "on_failure" in data:
        on_failure = read_template(source, source.top_line("on_failure"), "", "on_failure",
                                   prose_of(data["on_failure"]))
        check_names(source, source.top_line("on_failure"), "", "on_failure",
                    template_names([on_failure]), var_names | set(BUILTIN_NAMES),
                    earlier=None)
    return Playbook(name=declared, title=title or description.strip().splitlines()[0],
                    description=description.strip(), variables=variables, steps=steps,
                    on_failure=on_failure, path=path)


def _variables(source: PlaybookSource, table: object) -> tuple[Variable, ...]:
    """The ``[vars]`` table as Variables, each default checked against its type."""
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
        description = read_text(source, spec, "description",
                                source.var_line(name, "description"), where, required=True)
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

