"""How the playbook loader reads one field, and how it says where that field is written.

A playbook's errors name the file, the line, the step and the field: ``PlaybookSource``
turns a table and key back into a line of the TOML text (tomllib does not keep them), and
the readers here check one value's type and parse it (text, a template, an expression, a
list of conditions), raising a ``PlaybookError`` that says where.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nereus.cli.playbook.language.expr import Expression, ExpressionError, parse
from nereus.cli.playbook.language.template import Template, parse_template
from nereus.errors import UsageError

# a variable name or a step id
IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class PlaybookError(UsageError):
    """A playbook file that cannot be used as written; the message says where."""


class PlaybookSource:
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


def prose(text: str) -> str:
    """Text as written in a TOML multi-line string, reflowed: lines of one paragraph are
    joined with spaces, paragraphs (blank lines) become newlines."""
    paragraphs = [" ".join(line.strip() for line in block.splitlines() if line.strip())
                  for block in re.split(r"\n\s*\n", text.strip())]
    return "\n".join(p for p in paragraphs if p)


def read_text(source: PlaybookSource, table: Mapping[str, object], key: str,
              line: int | None, where: str, *, required: bool) -> str:
    """``table[key]`` as prose ("" when absent and not required)."""
    value = table.get(key)
    if value is None:
        if required:
            raise source.error(line, where, f"{key}: missing (say what this does and why)")
        return ""
    if not isinstance(value, str):
        raise source.error(line, where, f"{key}: expected a string, got {type(value).__name__}")
    return prose(value)


def prose_of(value: object) -> object:
    """``value`` reflowed as prose when it is a string, else as it is (to be refused)."""
    return prose(value) if isinstance(value, str) else value


def read_template(source: PlaybookSource, line: int | None, where: str, key: str,
                  value: object) -> Template:
    """``value`` parsed as a template."""
    if not isinstance(value, str):
        raise source.error(line, where, f"{key}: expected a string")
    try:
        return parse_template(value)
    except ExpressionError as exc:
        raise source.error(line, where, f"{key}: {exc.message}") from None


def read_optional_template(source: PlaybookSource, line: int | None, where: str, key: str,
                           value: object) -> Template | None:
    """``value`` parsed as a template, or None when absent."""
    return None if value is None else read_template(source, line, where, key, value)


def read_expression(source: PlaybookSource, line: int | None, where: str, key: str,
                    value: object) -> Expression:
    """``value`` parsed as an expression."""
    if not isinstance(value, str):
        raise source.error(line, where, f"{key}: expected an expression in a string")
    try:
        return parse(value)
    except ExpressionError as exc:
        raise source.error(line, where, f"{key}: {exc.message}") from None


def read_conditions(source: PlaybookSource, line: int | None, where: str, key: str,
                    value: object) -> tuple[Expression, ...]:
    """``value`` (one condition or a list of them) parsed as expressions."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise source.error(line, where, f"{key}: expected a list of conditions")
    return tuple(read_expression(source, line, where, key, item) for item in value)
