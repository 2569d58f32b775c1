"""A list of checks and its verdict: how ``checkpoint verify``, ``checkpoint restore`` and
``recovery-set verify`` answer.

The document carries ``ok`` and ``checks`` (each with ``name``, ``ok``, ``detail`` and
optionally ``skipped``); a skipped check does not count as a failure in the verdict line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nereus.cli.output import Answered
from nereus.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.context import Env


def render_checks(out: Console, verdict: str, checks: list[dict[str, Any]]) -> None:
    out.print(verdict)
    for check in checks:
        mark = "[green]ok[/green]  " if check["ok"] else (
            "[dim]skip[/dim]" if check.get("skipped") else "[red]FAIL[/red]")
        out.print(f"  {mark} {check['name']:<16} {check['detail']}")


def emit_verdict(env: Env, data: dict[str, Any], what: str) -> None:
    """Print the checks of ``what`` (one JSON document with ``--json``); exit 1 when they
    failed."""
    failed = [c["name"] for c in data["checks"] if not c["ok"] and not c.get("skipped")]
    verdict = (f"[green]OK[/green] {what}: {len(data['checks'])} checks passed" if data["ok"]
               else f"[red]FAILED[/red] {what}: {', '.join(failed) or 'incomplete'}")
    env.output.emit(data, lambda out: render_checks(out, verdict, data["checks"]))
    if not data["ok"]:
        raise Answered(ExitCode.NO)
