"""How a refusal of ``nereus.toml`` is worded: ``file:LINE``, the table, the key, the value
found, what was expected in plain words, and "did you mean" for a misspelt name.

``explain`` turns the ``msgspec.ValidationError`` of a strict conversion into that
``ConfigError``; ``error_at`` words the parser's own refusals the same way. The line is
found in the text (``line_of``), since TOML parsers keep no positions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import get_args, get_type_hints

import msgspec

from nereus.errors import ConfigError


def line_of(text: str, table: str, key: str | None = None) -> int | None:
    """1-based line of ``key`` inside ``[table]`` (or of the table header)."""
    header = re.compile(r"^\s*\[\s*" + re.escape(table).replace(r"\.", r"\s*\.\s*") + r"\s*\]")
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if header.match(line):
            if key is None:
                return index + 1
            for offset, inner in enumerate(lines[index + 1:], start=index + 2):
                if inner.lstrip().startswith("["):
                    break
                if re.match(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=", inner):
                    return offset
            return index + 1
    return None


def error_at(text: str, source: str, table: str | None, key: str | None,
             message: str, hint: str | None = None) -> ConfigError:
    line = line_of(text, table, key) if table else None
    where = f"{source}:{line}" if line else source
    prefix = f"[{table}] " if table else ""
    return ConfigError(f"{where}: {prefix}{message}", hint=hint)


def _expected(text: str) -> str:
    """msgspec's "Expected `int` >= 1" as plain words."""
    words = {"`int`": "an integer", "`float`": "a number", "`bool`": "true or false",
             "`str`": "a string", "`object`": "a table", "`array`": "a list"}
    for code, word in words.items():
        text = text.replace(code, word)
    return text.replace("Expected ", "expected ").replace("`", "")


def did_you_mean(name: str, known: list[str]) -> str | None:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known: {', '.join(known)}" if known else None


def explain(exc: msgspec.ValidationError, table: str, kind: type[msgspec.Struct],
            data: Mapping[str, object], text: str, source: str) -> ConfigError:
    """A ConfigError for ``exc``, raised converting ``data`` (table ``table``) to ``kind``."""
    detail, _, at = str(exc).rpartition(" - at `")
    if not detail:
        detail, at = str(exc), ""
    # the table's keys as written (a librdkafka name such as security.protocol has dots)
    fields = {f.encode_name: f.name for f in msgspec.structs.fields(kind) if f.name != "name"}
    at = at.rstrip("`").removeprefix("$").removeprefix(".")
    key = next((name for name in sorted(fields, key=len, reverse=True)
                if at == name or at.startswith(name + ".") or at.startswith(name + "[")),
               at.split(".")[0] or None)
    unknown = re.match(r"Object contains unknown field `([^`]+)`", detail)
    if unknown and not at:
        name = unknown.group(1)
        return error_at(text, source, table, name, f"unknown key {name!r}",
                        did_you_mean(name, list(fields)))
    missing = re.match(r"Object missing required field `([^`]+)`", detail)
    if missing:
        return error_at(text, source, table, None, f"needs {missing.group(1)} = ...")
    value = data.get(key) if key is not None else None
    shown = f"{key} = {value!r}" if key is not None else "this table"
    hint = None
    if detail.startswith("Invalid enum value") and key is not None:
        hinted = get_type_hints(kind)[fields.get(key, key)]
        allowed = [str(a) for a in get_args(hinted) if a is not type(None)]
        if not allowed or all(str(a).startswith("typing.Literal") for a in allowed):
            allowed = [str(v) for a in get_args(hinted) for v in get_args(a)]
        return error_at(text, source, table, key,
                        f"{shown}: expected one of {', '.join(allowed)}",
                        did_you_mean(str(value), allowed))
    if isinstance(value, str) and value.lower() in ("true", "false") and "bool" in detail:
        hint = f"write {key} = {value.lower()} (no quotes): a quoted value is a string"
    elif isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value):
        hint = f"write {key} = {value} (no quotes): a quoted value is a string"
    return error_at(text, source, table, key, f"{shown}: {_expected(detail)}", hint)
