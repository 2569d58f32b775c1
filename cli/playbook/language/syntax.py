"""The syntax of the playbook condition language: tokens, the tree, the parser.

Playbook checks must never run arbitrary code (a playbook in an operator's home is data,
not a program), so this is a hand-written tokenizer and recursive-descent parser whose
evaluator only walks JSON values. There is no attribute access on Python objects, no
calls other than the six functions below, no loops and no assignment.

Grammar (lowest precedence first)::

    expr       := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := sum [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") sum]
    sum        := unary (("+" | "-") unary)*
    unary      := "-" unary | postfix
    postfix    := primary ("." NAME | "[" expr "]")*
    primary    := NUMBER | STRING | "true" | "false" | "null" | "[" [expr ("," expr)*] "]"
                | NAME "(" [expr ("," expr)*] ")" | NAME | "(" expr ")"

Evaluation (what the values mean) is :mod:`nereus.cli.playbook.language.expr`.

Input bounds: a playbook is data an operator may have written by hand or generated, so an
expression longer than ``MAX_EXPRESSION_CHARS`` or nested deeper than
``MAX_EXPRESSION_DEPTH`` is refused when it is parsed, with an ``ExpressionError`` (a usage
error) that says the size and the limit. Depth is checked twice: the bracket nesting
(``(``, ``[``, a call's arguments) before parsing, because brackets are where the parser
recurses (prefix ``not``/``-`` and operator chains are parsed by loops), and the depth of
the finished tree, because that is where the evaluator, ``explain`` and the dataclasses'
``==`` recurse. With both under ``MAX_EXPRESSION_DEPTH`` no walk of an expression
recurses more than a few frames per level, so none can raise RecursionError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from nereus.errors import UsageError

Json: TypeAlias = Any  # null | bool | int | float | str | list[Json] | dict[str, Json]

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
FUNCTIONS = frozenset({"len", "all", "any", "pluck", "find", "where"})
_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
_PUNCTUATION = ("==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ".", ",", "+", "-")

# The longest expression (a condition, or one {hole} of a template) a playbook may hold.
# The longest shipped condition is about 150 characters.
MAX_EXPRESSION_CHARS = 4096
# The deepest an expression may nest: brackets, and levels of its syntax tree (every
# operator, call, index, key and not/- is one; `a and b and c` is 3 deep). The deepest
# shipped condition is 6 deep; long `and` chains belong in several conditions.
MAX_EXPRESSION_DEPTH = 32
# How much of an expression an error message quotes.
_QUOTE_CHARS = 60


def is_number(value: Json) -> bool:
    """A JSON number (a boolean is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


class ExpressionError(UsageError):
    """An expression that does not parse, or cannot be evaluated over the data it got."""


# -- tokens ------------------------------------------------------------------------------------


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
                raise _syntax(source, end, f"unexpected {source[end]!r} after number {text}")
            tokens.append(Token("NUMBER", text, float(text) if is_float else int(text), pos))
            pos = end
        elif char in "\"'":
            chars: list[str] = []
            end = pos + 1
            while True:
                if end >= len(source):
                    raise _syntax(source, pos, "unterminated string")
                current = source[end]
                if current == char:
                    break
                if current == "\\":
                    if end + 1 >= len(source) or source[end + 1] not in _ESCAPES:
                        raise _syntax(source, end, "unknown escape (use \\n \\t \\\\ \\\" \\')")
                    chars.append(_ESCAPES[source[end + 1]])
                    end += 2
                    continue
                chars.append(current)
                end += 1
            tokens.append(Token("STRING", source[pos:end + 1], "".join(chars), pos))
            pos = end + 1
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
                raise _syntax(source, pos, f"unexpected character {char!r}{hint}")
    tokens.append(Token("END", "", None, len(source)))
    return tokens


def _syntax(source: str, pos: int, message: str) -> ExpressionError:
    return ExpressionError(f"in `{quote(source, pos)}` at column {pos + 1}: {message}")


def quote(source: str, pos: int = 0) -> str:
    """``source`` for an error message: whole when short, else the part around ``pos``."""
    if len(source) <= _QUOTE_CHARS:
        return source
    start = max(0, min(pos - _QUOTE_CHARS // 2, len(source) - _QUOTE_CHARS))
    end = start + _QUOTE_CHARS
    return ("..." if start else "") + source[start:end] + ("..." if end < len(source) else "")


# -- syntax tree -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Literal(Node):
    value: Json


@dataclass(frozen=True, slots=True)
class Name(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Attr(Node):
    target: Node
    name: str


@dataclass(frozen=True, slots=True)
class Index(Node):
    target: Node
    index: Node


@dataclass(frozen=True, slots=True)
class ListOf(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Call(Node):
    function: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Unary(Node):
    op: str  # "not" | "-"
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary(Node):
    op: str  # and or == != < <= > >= in "not in" + -
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed expression and the text it came from (for messages)."""

    source: str
    root: Node

    def text(self, node: Node) -> str:
        return self.source[node.start:node.end]

    def __str__(self) -> str:
        return self.source


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.pos = 0

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def at(self, kind: str, text: str | None = None) -> bool:
        token = self.peek()
        return token.kind == kind and (text is None or token.text == text)

    def expect(self, kind: str, text: str) -> Token:
        if not self.at(kind, text):
            raise self.error(f"expected {text!r}")
        return self.take()

    def error(self, message: str) -> ExpressionError:
        token = self.peek()
        found = "the end" if token.kind == "END" else repr(token.text)
        return _syntax(self.source, token.start, f"{message}, found {found}")

    def parse(self) -> Node:
        if self.at("END"):
            raise self.error("empty expression")
        node = self.or_()
        if not self.at("END"):
            raise self.error("unexpected text after the expression")
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.at("NAME", "or"):
            self.take()
            right = self.and_()
            node = Binary(node.start, right.end, "or", node, right)
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.at("NAME", "and"):
            self.take()
            right = self.not_()
            node = Binary(node.start, right.end, "and", node, right)
        return node

    def not_(self) -> Node:
        starts: list[int] = []  # a loop, not recursion: `not not not x` cannot go deep here
        while self.at("NAME", "not"):
            starts.append(self.take().start)
        node = self.comparison()
        for start in reversed(starts):
            node = Unary(start, node.end, "not", node)
        return node

    def comparison(self) -> Node:
        left = self.sum_()
        token = self.peek()
        op: str | None = None
        if token.kind == "OP" and token.text in _COMPARISONS:
            op = self.take().text
        elif token.kind == "NAME" and token.text == "in":
            self.take()
            op = "in"
        elif (token.kind == "NAME" and token.text == "not"
              and self.tokens[self.pos + 1].kind == "NAME"
              and self.tokens[self.pos + 1].text == "in"):
            self.pos += 2
            op = "not in"
        if op is None:
            return left
        right = self.sum_()
        after = self.peek()
        if (after.kind == "OP" and after.text in _COMPARISONS) or (
                after.kind == "NAME" and after.text == "in"):
            raise self.error("comparisons do not chain; join them with and")
        return Binary(left.start, right.end, op, left, right)

    def sum_(self) -> Node:
        node = self.unary()
        while self.at("OP", "+") or self.at("OP", "-"):
            op = self.take().text
            right = self.unary()
            node = Binary(node.start, right.end, op, node, right)
        return node

    def unary(self) -> Node:
        starts: list[int] = []
        while self.at("OP", "-"):
            starts.append(self.take().start)
        node = self.postfix()
        for start in reversed(starts):
            if isinstance(node, Literal) and is_number(node.value):
                node = Literal(start, node.end, -node.value)
            else:
                node = Unary(start, node.end, "-", node)
        return node

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.at("OP", "."):
                self.take()
                token = self.peek()
                if token.kind != "NAME":
                    raise self.error("expected a key name after '.'")
                self.take()
                node = Attr(node.start, token.start + len(token.text), node, token.text)
            elif self.at("OP", "["):
                self.take()
                index = self.or_()
                end = self.expect("OP", "]").start + 1
                node = Index(node.start, end, node, index)
            else:
                return node

    def primary(self) -> Node:
        token = self.peek()
        if token.kind in ("NUMBER", "STRING"):
            self.take()
            return Literal(token.start, token.start + len(token.text), token.value)
        if token.kind == "OP" and token.text == "(":
            self.take()
            node = self.or_()
            self.expect("OP", ")")
            return node
        if token.kind == "OP" and token.text == "[":
            self.take()
            items = self.arguments("]")
            end = self.expect("OP", "]").start + 1
            return ListOf(token.start, end, tuple(items))
        if token.kind == "NAME":
            self.take()
            end = token.start + len(token.text)
            if token.text in ("true", "false", "null"):
                return Literal(token.start, end,
                               {"true": True, "false": False, "null": None}[token.text])
            if token.text in KEYWORDS:
                raise _syntax(self.source, token.start, f"{token.text!r} needs an operand")
            if self.at("OP", "("):
                if token.text not in FUNCTIONS:
                    raise _syntax(self.source, token.start,
                                  f"unknown function {token.text}(); known: "
                                  + ", ".join(sorted(FUNCTIONS)))
                self.take()
                args = self.arguments(")")
                close = self.expect("OP", ")").start + 1
                _check_arity(self.source, token, len(args))
                return Call(token.start, close, token.text, tuple(args))
            return Name(token.start, end, token.text)
        raise self.error("expected a value")

    def arguments(self, closing: str) -> list[Node]:
        items: list[Node] = []
        if self.at("OP", closing):
            return items
        items.append(self.or_())
        while self.at("OP", ","):
            self.take()
            items.append(self.or_())
        return items


_ARITY = {"len": (1, 1), "all": (1, 2), "any": (1, 2), "pluck": (2, 2), "find": (3, 3),
          "where": (3, 3)}


def _check_arity(source: str, token: Token, count: int) -> None:
    low, high = _ARITY[token.text]
    if not low <= count <= high:
        wanted = str(low) if low == high else f"{low} or {high}"
        raise _syntax(source, token.start,
                      f"{token.text}() takes {wanted} argument(s), got {count}")


def _too_deep(source: str, levels: int, pos: int) -> ExpressionError:
    return ExpressionError(
        f"expression nested {levels} deep, the limit is {MAX_EXPRESSION_DEPTH} "
        f"(at column {pos + 1} of `{quote(source, pos)}`; split a long `and` into several "
        "conditions, or drop redundant brackets)")


def _check_brackets(source: str, tokens: list[Token]) -> None:
    """Refuse bracket nesting beyond the limit before the parser recurses into it."""
    level = deepest = where = 0
    for token in tokens:
        if token.kind == "OP" and token.text in ("(", "["):
            level += 1
            if level > deepest:
                deepest, where = level, token.start
        elif token.kind == "OP" and token.text in (")", "]"):
            level = max(0, level - 1)
    if deepest > MAX_EXPRESSION_DEPTH:
        raise _too_deep(source, deepest, where)


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Attr):
        return (node.target,)
    if isinstance(node, Index):
        return (node.target, node.index)
    if isinstance(node, ListOf):
        return node.items
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    return ()


def depth(node: Node) -> tuple[int, Node]:
    """The number of levels of the tree under ``node`` and its deepest node (a loop, so
    any tree can be measured)."""
    deepest, at = 0, node
    stack = [(node, 1)]
    while stack:
        current, level = stack.pop()
        if level > deepest:
            deepest, at = level, current
        stack.extend((child, level + 1) for child in _children(current))
    return deepest, at


def parse(source: str) -> Expression:
    """Parse ``source``; raises ExpressionError naming the column of the problem, or the
    size or depth that is over its limit (never RecursionError)."""
    if len(source) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression is {len(source)} characters, the limit is "
                              f"{MAX_EXPRESSION_CHARS} (`{quote(source)}`)")
    parser = _Parser(source)
    _check_brackets(source, parser.tokens)
    root = parser.parse()
    levels, at = depth(root)
    if levels > MAX_EXPRESSION_DEPTH:
        raise _too_deep(source, levels, at.start)
    return Expression(source, root)
