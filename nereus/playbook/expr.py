"""The condition language of playbooks: a small, safe expression grammar over JSON values.

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

Values are JSON: null, booleans, numbers, strings, lists, objects. Semantics:

- ``==``/``!=`` compare structurally; a boolean never equals a number (``true != 1``).
- ``<``, ``<=``, ``>``, ``>=`` order two numbers or two strings, anything else is an error.
- ``a in b``: an element of a list, a substring of a string, or a key of an object.
- ``+``/``-`` on numbers (``+`` also joins two strings).
- ``x.name`` reads a key of an object, ``x[i]`` an index of a list (negative counts from
  the end) or a key of an object. A missing key or index is an error naming the path, so
  a typo in a check fails loudly instead of comparing null.
- Truthiness (``and``, ``or``, ``not``, a bare condition): null, false, 0, "", [] and {}
  are false; everything else is true. ``and``/``or`` short-circuit and yield booleans.

Functions (``PATH`` is a string naming a dotted path inside each item, e.g. ``"gate"`` or
``"checks.ok"``; a missing key along it reads as null):

- ``len(x)``: the length of a list, string or object.
- ``all(list[, PATH])`` / ``any(list[, PATH])``: every / some item (or its PATH) is truthy.
- ``pluck(list, PATH)``: the list of every item's PATH.
- ``find(list, PATH, value)``: the first item whose PATH equals value, else null.
- ``where(list, PATH, value)``: every item whose PATH equals value.

An evaluation problem (a missing key, comparing a string with a number) raises
``ExpressionError``; a playbook check that raises is a failed check whose detail is the
message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from nereus.errors import UsageError

Json: TypeAlias = Any  # null | bool | int | float | str | list[Json] | dict[str, Json]

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
FUNCTIONS = frozenset({"len", "all", "any", "pluck", "find", "where"})
_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
_PUNCTUATION = ("==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ".", ",", "+", "-")


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
    return ExpressionError(f"in `{source}` at column {pos + 1}: {message}")


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
        if self.at("NAME", "not"):
            start = self.take().start
            operand = self.not_()
            return Unary(start, operand.end, "not", operand)
        return self.comparison()

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
        if self.at("OP", "-"):
            start = self.take().start
            operand = self.unary()
            if isinstance(operand, Literal) and _is_number(operand.value):
                return Literal(start, operand.end, -operand.value)
            return Unary(start, operand.end, "-", operand)
        return self.postfix()

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


def parse(source: str) -> Expression:
    """Parse ``source``; raises ExpressionError naming the column of the problem."""
    return Expression(source, _Parser(source).parse())


# -- evaluation --------------------------------------------------------------------------------


def _is_number(value: Json) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def truthy(value: Json) -> bool:
    """JSON truthiness: null, false, 0, "", [] and {} are false."""
    if value is None or value is False:
        return False
    if _is_number(value):
        return bool(value)
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


def _kind(value: Json) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def equal(left: Json, right: Json) -> bool:
    """Structural JSON equality; booleans and numbers never equal each other."""
    if _kind(left) != _kind(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right,
                                                                         strict=True))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(equal(left[k], right[k]) for k in left)
    return bool(left == right)


def show(value: Json, limit: int = 80) -> str:
    """A value as JSON, shortened for messages."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _path_get(item: Json, path: str) -> Json:
    for part in path.split(".") if path else ():
        if isinstance(item, dict):
            item = item.get(part)
        else:
            return None
    return item


def _order(op: str, left: Json, right: Json, text: str) -> bool:
    both_numbers = _is_number(left) and _is_number(right)
    both_strings = isinstance(left, str) and isinstance(right, str)
    if not (both_numbers or both_strings):
        raise ExpressionError(f"`{text}`: cannot order a {_kind(left)} and a {_kind(right)} "
                              f"({show(left)} {op} {show(right)})")
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)


def _contains(container: Json, element: Json, text: str) -> bool:
    if isinstance(container, list):
        return any(equal(element, item) for item in container)
    if isinstance(container, str) and isinstance(element, str):
        return element in container
    if isinstance(container, dict) and isinstance(element, str):
        return element in container
    raise ExpressionError(f"`{text}`: cannot look for a {_kind(element)} in a "
                          f"{_kind(container)}")


class _Evaluator:
    def __init__(self, expression: Expression, scope: Mapping[str, Json]) -> None:
        self.expression = expression
        self.scope = scope

    def fail(self, node: Node, message: str) -> ExpressionError:
        return ExpressionError(f"`{self.expression.text(node)}`: {message}")

    def eval(self, node: Node) -> Json:
        method: Callable[[Any], Json] = getattr(self, f"_{type(node).__name__.lower()}")
        return method(node)

    def _literal(self, node: Literal) -> Json:
        return node.value

    def _name(self, node: Name) -> Json:
        if node.name not in self.scope:
            known = ", ".join(sorted(self.scope)) or "nothing"
            raise self.fail(node, f"unknown name {node.name!r} (known here: {known})")
        return self.scope[node.name]

    def _attr(self, node: Attr) -> Json:
        target = self.eval(node.target)
        if not isinstance(target, dict):
            raise self.fail(node, f"{self.expression.text(node.target)} is a {_kind(target)} "
                            f"({show(target, 40)}), not an object")
        if node.name not in target:
            keys = ", ".join(sorted(target)[:12]) or "none"
            raise self.fail(node, f"no key {node.name!r} in {self.expression.text(node.target)} "
                            f"(keys: {keys})")
        return target[node.name]

    def _index(self, node: Index) -> Json:
        target = self.eval(node.target)
        index = self.eval(node.index)
        where = self.expression.text(node.target)
        if isinstance(target, list):
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.fail(node, f"a list index must be an integer, got {show(index)}")
            if not -len(target) <= index < len(target):
                raise self.fail(node, f"index {index} is out of range: {where} has "
                                f"{len(target)} item(s)")
            return target[index]
        if isinstance(target, dict):
            if not isinstance(index, str):
                raise self.fail(node, f"an object key must be a string, got {show(index)}")
            if index not in target:
                raise self.fail(node, f"no key {index!r} in {where}")
            return target[index]
        raise self.fail(node, f"{where} is a {_kind(target)}, it cannot be indexed")

    def _listof(self, node: ListOf) -> Json:
        return [self.eval(item) for item in node.items]

    def _unary(self, node: Unary) -> Json:
        value = self.eval(node.operand)
        if node.op == "not":
            return not truthy(value)
        if not _is_number(value):
            raise self.fail(node, f"cannot negate a {_kind(value)}")
        return -value

    def _binary(self, node: Binary) -> Json:
        if node.op == "and":
            return truthy(self.eval(node.left)) and truthy(self.eval(node.right))
        if node.op == "or":
            return truthy(self.eval(node.left)) or truthy(self.eval(node.right))
        left, right = self.eval(node.left), self.eval(node.right)
        text = self.expression.text(node)
        if node.op == "==":
            return equal(left, right)
        if node.op == "!=":
            return not equal(left, right)
        if node.op in ("<", "<=", ">", ">="):
            return _order(node.op, left, right, text)
        if node.op == "in":
            return _contains(right, left, text)
        if node.op == "not in":
            return not _contains(right, left, text)
        if node.op == "+" and isinstance(left, str) and isinstance(right, str):
            return left + right
        if not (_is_number(left) and _is_number(right)):
            raise self.fail(node, f"{node.op} needs two numbers, got a {_kind(left)} and a "
                            f"{_kind(right)}")
        result = left + right if node.op == "+" else left - right
        if isinstance(result, float) and not math.isfinite(result):
            raise self.fail(node, "the result is not a finite number")
        return result

    def _call(self, node: Call) -> Json:
        args = [self.eval(arg) for arg in node.args]
        subject = args[0]
        if node.function == "len":
            if not isinstance(subject, list | str | dict):
                raise self.fail(node, f"len() of a {_kind(subject)}")
            return len(subject)
        if not isinstance(subject, list):
            raise self.fail(node, f"{node.function}() needs a list, got a {_kind(subject)} "
                            f"({show(subject, 40)})")
        path = ""
        if len(args) > 1:
            if not isinstance(args[1], str):
                raise self.fail(node, f"{node.function}(): the path must be a string such as "
                                f"\"state\", got {show(args[1])}")
            path = args[1]
        values = [_path_get(item, path) for item in subject]
        if node.function == "all":
            return all(truthy(v) for v in values)
        if node.function == "any":
            return any(truthy(v) for v in values)
        if node.function == "pluck":
            return values
        wanted = args[2]
        if node.function == "find":
            return next((item for item, v in zip(subject, values, strict=True)
                         if equal(v, wanted)), None)
        return [item for item, v in zip(subject, values, strict=True) if equal(v, wanted)]


def evaluate(expression: Expression, scope: Mapping[str, Json]) -> Json:
    """The value of ``expression`` with the names in ``scope``; ExpressionError if it
    cannot be computed."""
    return _Evaluator(expression, scope).eval(expression.root)


def explain(expression: Expression, scope: Mapping[str, Json]) -> str:
    """Why a condition did not hold, in terms of the values it looked at."""
    evaluator = _Evaluator(expression, scope)
    try:
        return _explain(evaluator, expression.root)
    except ExpressionError as exc:
        return exc.message


def _explain(evaluator: _Evaluator, node: Node) -> str:
    text = evaluator.expression.text
    if isinstance(node, Binary) and node.op == "and":
        for part in (node.left, node.right):
            if not truthy(evaluator.eval(part)):
                return _explain(evaluator, part)
    if isinstance(node, Binary) and node.op == "or":
        return "; ".join(_explain(evaluator, part) for part in (node.left, node.right))
    if isinstance(node, Binary) and node.op not in ("and", "or"):
        shown = [f"{text(side)} = {show(evaluator.eval(side))}"
                 for side in (node.left, node.right) if not isinstance(side, Literal)]
        return f"`{text(node)}` is false" + (f": {', '.join(shown)}" if shown else "")
    if isinstance(node, Unary) and node.op == "not":
        return f"`{text(node)}` is false: {text(node.operand)} = " \
               f"{show(evaluator.eval(node.operand))}"
    return f"`{text(node)}` is false: it is {show(evaluator.eval(node))}"


def names_used(expression: Expression) -> Iterator[tuple[str, str | None]]:
    """Every free name with the key read right after it (``steps.take.x`` gives
    ``("steps", "take")``), so a playbook can check its references when it is loaded."""
    stack: list[Node] = [expression.root]
    while stack:
        node = stack.pop()
        if isinstance(node, Name):
            yield node.name, None
        elif isinstance(node, Attr) and isinstance(node.target, Name):
            yield node.target.name, node.name
        elif isinstance(node, Attr):
            stack.append(node.target)
        elif isinstance(node, Index):
            if isinstance(node.target, Name) and isinstance(node.index, Literal) and \
                    isinstance(node.index.value, str):
                yield node.target.name, node.index.value
            else:
                stack.append(node.target)
            stack.append(node.index)
        elif isinstance(node, ListOf):
            stack.extend(node.items)
        elif isinstance(node, Call):
            stack.extend(node.args)
        elif isinstance(node, Unary):
            stack.append(node.operand)
        elif isinstance(node, Binary):
            stack.extend((node.left, node.right))


def literal(value: Json) -> str:
    """``value`` written in this language (the inverse of parsing a literal)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExpressionError(f"no literal for {value}")
        text = format(Decimal(repr(value)), "f")  # the grammar has no exponents
        return text if "." in text else text + ".0"
    if _is_number(value):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}.get(c, c)
                             for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise ExpressionError(f"no literal for a {_kind(value)}")
