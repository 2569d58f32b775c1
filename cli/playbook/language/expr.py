"""The condition language of playbooks: a small, safe expression language over JSON values.

A playbook is data, not a program: the parser is hand-written
(:mod:`nereus.cli.playbook.language.parser`) and the evaluator here only walks JSON values
— no attribute access on Python objects, no calls but the six functions, no loops, no
assignment. The meaning of each form and function is the table in ``playbooks/README.md``
("Conditions"). A missing key or index, or comparing a string with a number, raises
``ExpressionError`` naming the path; a check that raises is a failed check. The evaluator
recurses over the syntax tree, bounded where the tree is made (depth at most
``MAX_EXPRESSION_DEPTH``); walks over *values* (``equal``) are loops, since a command's
output can nest as deep as it likes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from nereus.cli.playbook.language.parser import MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH, parse
from nereus.cli.playbook.language.tokens import (
    FUNCTIONS,
    KEYWORDS,
    ExpressionError,
    Json,
    is_number,
)
from nereus.cli.playbook.language.tree import (
    Attr,
    Binary,
    Call,
    Expression,
    Index,
    ListOf,
    Literal,
    Name,
    Node,
    Unary,
)

# the language's public names, wherever they are defined
__all__ = ["FUNCTIONS", "KEYWORDS", "MAX_EXPRESSION_CHARS", "MAX_EXPRESSION_DEPTH",
           "Expression", "ExpressionError", "Json", "equal",
           "evaluate", "explain", "literal", "names_used", "parse", "show", "truthy"]

# -- evaluation --------------------------------------------------------------------------------


def truthy(value: Json) -> bool:
    """JSON truthiness: null, false, 0, "", [] and {} are false."""
    if value is None or value is False:
        return False
    if is_number(value):
        return bool(value)
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


def _kind(value: Json) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def equal(left: Json, right: Json) -> bool:
    """Structural JSON equality; booleans and numbers never equal each other. A loop over
    pairs, not recursion: the values come from commands' output, however deep."""
    pairs = [(left, right)]
    while pairs:
        a, b = pairs.pop()
        if _kind(a) != _kind(b):
            return False
        if isinstance(a, list):
            if len(a) != len(b):
                return False
            pairs.extend(zip(a, b, strict=True))
        elif isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            pairs.extend((a[k], b[k]) for k in a)
        elif a != b:
            return False
    return True


def show(value: Json, limit: int = 80) -> str:
    """A value as JSON, shortened for messages."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except RecursionError:  # a value nested deeper than json can write
        text = f"<a {_kind(value)} too deeply nested to show>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _path_get(item: Json, path: str) -> Json:
    for part in path.split(".") if path else ():
        if isinstance(item, dict):
            item = item.get(part)
        else:
            return None
    return item


def _order(op: str, left: Json, right: Json, text: str) -> bool:
    both_numbers = is_number(left) and is_number(right)
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
        if not is_number(value):
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
        if not (is_number(left) and is_number(right)):
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
    if is_number(value):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}.get(c, c)
                             for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise ExpressionError(f"no literal for a {_kind(value)}")
