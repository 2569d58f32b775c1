"""Confirmation of destructive mutations: a prompt on a terminal, ``--yes`` in scripts;
without a terminal and without ``--yes`` the command refuses (exit 2)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import typer

from nereus.cli.context import Env
from nereus.cli.mutation.planning import Planned
from nereus.cli.mutation.reporting import describe, print_impact


def confirm(env: Env, planned: Sequence[Planned]) -> None:
    """Ask on the terminal before destructive mutations; refuse (exit 2) without one."""
    from nereus.cli.output import shown

    what = "; ".join(f"{describe(p.head.kind, p.head.target)} on {len(p.plans)} shard(s)"
                     for p in planned if p.destructive)
    if not what:
        return

    def impact() -> None:
        for p in planned:
            print_impact(env.output.err, shown(p.head.impact))

    ask(what, before=impact)


def ask(what: str, *, before: Callable[[], object] = lambda: None) -> None:
    """Ask "``what``?" on the terminal (after ``before`` showed the impact); refuse (exit 2)
    without a terminal, and raise ``NotConfirmed`` (exit 1) on "no"."""
    from nereus.errors import NotConfirmed, UsageError

    if not sys.stdin.isatty():
        raise UsageError(
            f"{what}: needs confirmation and there is no terminal to ask on",
            hint="pass --yes to confirm in a script, or --dry-run to see what would change")
    before()
    if not typer.confirm(f"{what}?", default=False, err=True):
        raise NotConfirmed("not confirmed: nothing was written")
