"""Text with ``{expression}`` holes: how playbook arguments take variables and earlier
steps' outputs.

``"checkpoint verify {steps.take.checkpoint_id}"`` or ``"--reason={reason}"``: each hole
is an expression of :mod:`nereus.cli.playbook.language.expr` (usually a variable or a path into a
step's output), ``{{`` and ``}}`` are literal braces. Holes are parsed when the playbook
is loaded, so a typo is reported with the file and step before anything runs.

A hole's value becomes text: a string as it is, a number in decimal, a boolean as
``true``/``false``, a list or object as compact JSON. A null is an error: an argument that
silently became ``None`` would run the wrong command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from nereus.cli.playbook.language.expr import (
    Expression,
    ExpressionError,
    Json,
    evaluate,
    names_used,
    parse,
)
from nereus.cli.playbook.language.tokens import quote as _excerpt


@dataclass(frozen=True, slots=True)
class Template:
    source: str
    parts: tuple[str | Expression, ...]

    def __str__(self) -> str:
        return self.source

    @property
    def holes(self) -> tuple[Expression, ...]:
        return tuple(p for p in self.parts if isinstance(p, Expression))

    def names(self) -> Iterator[tuple[str, str | None]]:
        for hole in self.holes:
            yield from names_used(hole)


def parse_template(source: str) -> Template:
    """Split ``source`` into text and parsed holes; ExpressionError on a bad hole."""
    parts: list[str | Expression] = []
    text: list[str] = []
    pos = 0
    while pos < len(source):
        char = source[pos]
        if source.startswith("{{", pos) or source.startswith("}}", pos):
            text.append(char)
            pos += 2
        elif char == "}":
            raise ExpressionError(f"in {_excerpt(source, pos)!r} at column {pos + 1}: a lone '}}' "
                                  "(write '}}}}' for a literal brace)")
        elif char == "{":
            end = _closing(source, pos)
            if text:
                parts.append("".join(text))
                text = []
            inner = source[pos + 1:end]
            try:
                parts.append(parse(inner.strip()))
            except ExpressionError as exc:
                raise ExpressionError(f"in {_excerpt(source, pos)!r}: {exc.message}") from None
            pos = end + 1
        else:
            text.append(char)
            pos += 1
    if text:
        parts.append("".join(text))
    return Template(source, tuple(parts))


def _closing(source: str, start: int) -> int:
    """The index of the ``}`` closing the hole opened at ``start`` (quotes respected)."""
    quote: str | None = None
    pos = start + 1
    while pos < len(source):
        char = source[pos]
        if quote is not None:
            if char == "\\":
                pos += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "}":
            return pos
        elif char == "{":
            break
        pos += 1
    raise ExpressionError(f"in {_excerpt(source, start)!r} at column {start + 1}: '{{' is "
                          "not closed (write '{{{{' for a literal brace)")


def split_at_equals(template: Template) -> tuple[Template, Template] | None:
    """``--reason={reason}`` -> (``--reason``, ``{reason}``): the template split at its
    first ``=`` outside a hole, or None when its text has none."""
    source = template.source
    pos = 0
    while pos < len(source):
        if source.startswith("{{", pos) or source.startswith("}}", pos):
            pos += 2
        elif source[pos] == "{":
            pos = _closing(source, pos) + 1
        elif source[pos] == "=":
            return parse_template(source[:pos]), parse_template(source[pos + 1:])
        else:
            pos += 1
    return None


def as_text(value: Json, *, hole: str) -> str:
    if value is None:
        raise ExpressionError(f"{{{hole}}} is null")
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    except RecursionError:
        raise ExpressionError(f"{{{hole}}} is nested too deeply to write as text") from None


def render(template: Template, scope: Mapping[str, Json]) -> str:
    """The text with every hole filled from ``scope``; ExpressionError if one cannot be."""
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
        else:
            out.append(as_text(evaluate(part, scope), hole=part.source))
    return "".join(out)


def known(hole: Expression, scope: Mapping[str, Json]) -> bool:
    """Whether every name ``hole`` reads is in ``scope``: a variable, and for
    ``steps.ID`` that step's output (a step not run yet is not known)."""
    steps = scope.get("steps")
    for name, key in names_used(hole):
        if name not in scope:
            return False
        if name == "steps" and key is not None and not (isinstance(steps, dict)
                                                        and key in steps):
            return False
    return True


def render_known(template: Template, scope: Mapping[str, Json]) -> str:
    """Like ``render``, but a hole that needs what is not known yet (the output of a step
    that has not run) is shown as ``<expression>``: what a dry run prints."""
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
        elif known(part, scope):
            out.append(as_text(evaluate(part, scope), hole=part.source))
        else:
            out.append(f"<{part.source}>")
    return "".join(out)
