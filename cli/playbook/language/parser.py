"""The parser of the playbook condition language: text to a bounded syntax tree.

The tokenizer (:mod:`nereus.cli.playbook.language.tokens`) and this recursive-descent
parser are written by hand (a playbook is data, never code); the grammar is in
``playbooks/README.md`` ("Conditions"), the meaning in ``expr``. An expression longer
than ``MAX_EXPRESSION_CHARS`` or nested deeper than ``MAX_EXPRESSION_DEPTH`` is refused with
an ``ExpressionError`` naming the size and the limit. Depth is checked twice: bracket
nesting before parsing (brackets are where the parser recurses; prefix operators and
chains are loops), and the finished tree's depth (where the evaluator, ``explain`` and
``==`` recurse), so no walk can raise RecursionError.
"""

from __future__ import annotations

from nereus.cli.playbook.language.tokens import (
    FUNCTIONS,
    KEYWORDS,
    ExpressionError,
    Token,
    is_number,
    quote,
    syntax_error,
    tokenize,
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
    depth,
)

_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")

# The longest expression (a condition, or one {hole} of a template) a playbook may hold.
# The longest shipped condition is about 150 characters.
MAX_EXPRESSION_CHARS = 4096
# The deepest an expression may nest: brackets, and levels of its syntax tree (every
# operator, call, index, key and not/- is one; `a and b and c` is 3 deep). The deepest
# shipped condition is 6 deep; long `and` chains belong in several conditions.
MAX_EXPRESSION_DEPTH = 32


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
        return syntax_error(self.source, token.start, f"{message}, found {found}")

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
                raise syntax_error(self.source, token.start, f"{token.text!r} needs an operand")
            if self.at("OP", "("):
                if token.text not in FUNCTIONS:
                    raise syntax_error(self.source, token.start,
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
        raise syntax_error(source, token.start,
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
