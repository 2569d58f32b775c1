"""A list of checks and its verdict: how ``checkpoint verify``, ``checkpoint restore`` and
``recovery-set verify`` answer.

The document carries ``ok`` and ``checks`` (each a ``Check``: ``name``, ``ok``, ``detail``,
``skipped``); a skipped check does not count as a failure in the verdict line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import msgspec

from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.checkpoint.verify import Check
    from nereus.cli.context import Env


class Verdict(Protocol):
    """A document that answers with checks: its verdict and the checks behind it."""

    @property
    def ok(self) -> bool: ...

    @property
    def checks(self) -> list[Check]: ...


def render_checks(out: Console, verdict: str, checks: Sequence[Check]) -> None:
    out.print(verdict)
    for check in checks:
        mark = "[green]ok[/green]  " if check.ok else (
            "[dim]skip[/dim]" if check.skipped else "[red]FAIL[/red]")
        out.print(f"  {mark} {check.name:<16} {check.detail}")


def emit_verdict(env: Env, document: Verdict, what: str) -> None:
    """Print the checks of ``what`` (one JSON document with ``--json``); exit 1 when they
    failed."""
    failed = [c.name for c in document.checks if not c.ok and not c.skipped]
    verdict = (f"[green]OK[/green] {what}: {len(document.checks)} checks passed"
               if document.ok else f"[red]FAILED[/red] {what}: {', '.join(failed) or 'incomplete'}")
    data = msgspec.to_builtins(document)

    def human(out: Console) -> None:
        from nereus.checkpoint.verify import Check

        # the checks as emit left them in ``data``: every string made terminal-safe
        render_checks(out, verdict, msgspec.convert(data["checks"], list[Check]))

    env.output.emit(data, human)
    if not document.ok:
        raise Answered(ExitCode.NO)
