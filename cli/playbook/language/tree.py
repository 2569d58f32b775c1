"""The syntax tree of the playbook condition language, and how deep a tree is.

Every node carries the span of the expression text it was parsed from (``start``, ``end``),
so an explanation or an error can quote the part of the expression it is about. Nodes are
frozen values; :func:`depth` measures a tree with a loop, so any tree can be measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from nereus.cli.playbook.language.tokens import Json


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


def children(node: Node) -> tuple[Node, ...]:
    """The nodes directly under ``node``."""
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
        stack.extend((child, level + 1) for child in children(current))
    return deepest, at
