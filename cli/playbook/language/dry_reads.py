"""Which steps a dry run may run to show what a run would do.

A step's holes can need an earlier step's output: ``lane close`` asks "Close lane local?
(3 due message(s) now)" from ``lane list``, ``recovery-set verify`` runs once for each
shard ``shard list`` names. A dry run shows those values, not ``<find(steps...)>``, by
running the steps they come from when they only read: a command of ``READ_ONLY_COMMANDS``
(none of them writes to the home, a log, a coordinator or an object store), not a wait
(whose output is the one after waiting) and not a ``for_each``. Any other step (one that
changes something) never runs in a dry run; the holes that need it stay ``<...>``, and the
plan says why.
"""

from __future__ import annotations

from collections.abc import Iterator

from nereus.cli.playbook.language.command import command_words
from nereus.cli.playbook.language.expr import Expression, ExpressionError, names_used
from nereus.cli.playbook.language.model import Playbook, Step
from nereus.cli.playbook.language.template import Template

# listing and showing commands, fast and without side effects (checked by
# tests/cli/test_playbook_cli.py: a dry run leaves the home byte for byte as it was)
READ_ONLY_COMMANDS: frozenset[tuple[str, ...]] = frozenset({
    ("status",), ("engine", "status"), ("lane", "list"), ("shard", "list"),
    ("shard", "inspect"), ("attempt", "list"), ("message", "show"), ("message", "list"),
    ("message", "explain"), ("command", "show"), ("checkpoint", "list"),
    ("recovery-set", "show"), ("cluster", "status"), ("cluster", "nodes"),
})


def command_name(step: Step) -> tuple[str, ...]:
    """The command a step runs (``("lane", "list")``); empty when it cannot be told."""
    try:
        words = command_words(step.run)
    except ExpressionError:
        return ()
    return tuple(word.text.source for word in words if word.kind == "command")


def why_not_read(step: Step) -> str | None:
    """Why a dry run does not run ``step`` to learn its output, or None when it may."""
    if command_name(step) not in READ_ONLY_COMMANDS:
        return f"step {step.id} changes something: a dry run does not run it"
    if step.wait is not None:
        return (f"step {step.id} waits until {step.wait.until.source}: its output is known "
                "after the wait")
    if step.for_each is not None:
        return f"step {step.id} runs once for each item: a dry run does not run it"
    return None


def _holes(step: Step) -> Iterator[Expression]:
    templates: list[Template | None] = [*step.run, step.home, step.confirm, step.on_failure]
    for template in templates:
        if template is not None:
            yield from template.holes
    if step.for_each is not None:
        yield step.for_each


def steps_used(step: Step) -> list[str]:
    """The earlier steps whose output ``step``'s holes (command, home, confirmation,
    advice, ``for_each``) read, in the order first read."""
    found: list[str] = []
    for hole in _holes(step):
        for name, key in names_used(hole):
            if name == "steps" and key is not None and key not in found:
                found.append(key)
    return found


def steps_needed(playbook: Playbook) -> set[str]:
    """Every step whose output some step's holes read: what a dry run wants to know."""
    return {used for step in playbook.steps for used in steps_used(step)}
