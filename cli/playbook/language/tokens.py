"""The words of the playbook condition language: its JSON values, its error, its tokens.

The tokenizer turns an expression's text into NUMBER, STRING, NAME and OP tokens (then
END), each with the column it starts at, so every error can quote the expression and name
the column. Which names are keywords and which are functions is fixed here; the tree and
the parser are :mod:`nereus.cli.playbook.language.tree` and
:mod:`nereus.cli.playbook.language.parser`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from nereus.errors import UsageError

Json: TypeAlias = Any  # null | bool | int | float | str | list[Json] | dict[str, Json]

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
FUNCTIONS = frozenset({"len", "all", "any", "pluck", "find", "where"})
_PUNCTUATION = ("==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ".", ",", "+", "-")
# How much of an expression an error message quotes.
_QUOTE_CHARS = 60


def is_number(value: Json) -> bool:
    """A JSON number (a boolean is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


class ExpressionError(UsageError):
    """An expression that does not parse, or cannot be evaluated over the data it got."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # NUMBER STRING NAME OP END
    text: str
    value: Json
    start: int


def _is_name_start(char: str) -> bool:
    return char.isascii() and (char.isalpha() or char == "_")


def _is_name_char(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def tokenize(source: str) -> list[Token]:
    """The tokens of ``source``, ending with an END token; errors name the column."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(source):
        char = source[pos]
        if char in " \t\r\n":
            pos += 1
        elif char.isascii() and char.isdigit():
            tokens.append(_number(source, pos))
            pos += len(tokens[-1].text)
        elif char in "\"'":
            tokens.append(_string(source, pos))
            pos += len(tokens[-1].text)
        elif _is_name_start(char):
            end = pos
            while end < len(source) and _is_name_char(source[end]):
                end += 1
            text = source[pos:end]
            tokens.append(Token("NAME", text, text, pos))
            pos = end
        else:
            for op in _PUNCTUATION:
                if source.startswith(op, pos):
                    tokens.append(Token("OP", op, op, pos))
                    pos += len(op)
                    break
            else:
                hint = " (use and / or / not)" if char in "&|!" else ""
                raise syntax_error(source, pos, f"unexpected character {char!r}{hint}")
    tokens.append(Token("END", "", None, len(source)))
    return tokens


def _number(source: str, pos: int) -> Token:
    """The integer or decimal number at ``pos`` (a name character right after it is an
    error)."""
    end = pos
    while end < len(source) and source[end].isascii() and source[end].isdigit():
        end += 1
    is_float = (end + 1 < len(source) and source[end] == "."
                and source[end + 1].isascii() and source[end + 1].isdigit())
    if is_float:
        end += 1
        while end < len(source) and source[end].isascii() and source[end].isdigit():
            end += 1
    text = source[pos:end]
    if end < len(source) and _is_name_char(source[end]):
        raise syntax_error(source, end, f"unexpected {source[end]!r} after number {text}")
    return Token("NUMBER", text, float(text) if is_float else int(text), pos)


def _string(source: str, pos: int) -> Token:
    """The string quoted at ``pos`` (by ' or "), its escapes decoded."""
    quote_char = source[pos]
    chars: list[str] = []
    end = pos + 1
    while True:
        if end >= len(source):
            raise syntax_error(source, pos, "unterminated string")
        current = source[end]
        if current == quote_char:
            break
        if current == "\\":
            if end + 1 >= len(source) or source[end + 1] not in _ESCAPES:
                raise syntax_error(source, end,
                                   "unknown escape (use \\n \\t \\\\ \\\" \\')")
            chars.append(_ESCAPES[source[end + 1]])
            end += 2
            continue
        chars.append(current)
        end += 1
    return Token("STRING", source[pos:end + 1], "".join(chars), pos)


def syntax_error(source: str, pos: int, message: str) -> ExpressionError:
    """An ExpressionError quoting ``source`` around ``pos`` and naming its column."""
    return ExpressionError(f"in `{quote(source, pos)}` at column {pos + 1}: {message}")


def quote(source: str, pos: int = 0) -> str:
    """``source`` for an error message: whole when short, else the part around ``pos``."""
    if len(source) <= _QUOTE_CHARS:
        return source
    start = max(0, min(pos - _QUOTE_CHARS // 2, len(source) - _QUOTE_CHARS))
    end = start + _QUOTE_CHARS
    return ("..." if start else "") + source[start:end] + ("..." if end < len(source) else "")
