"""Confirmation of destructive mutations: a prompt on a terminal, ``--yes`` in scripts;
without a terminal and without ``--yes`` the command refuses (exit 2)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from nereus.cli.context import Env
from nereus.cli.mutation.planning import Planned
from nereus.cli.mutation.reporting import describe, print_impact


def confirm(env: Env, planned: Sequence[Planned]) -> None:
    """Ask on the terminal before destructive mutations; refuse (exit 2) without one."""
    from nereus.errors import NotConfirmed, UsageError

    what = "; ".join(f"{describe(p.head.kind, p.head.target)} on {len(p.plans)} shard(s)"
                     for p in planned if p.destructive)
    if not what:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"{what}: needs confirmation and there is no terminal to ask on",
            hint="pass --yes to confirm in a script, or --dry-run to see what would change")
    from nereus.cli.output import shown

    for p in planned:
        print_impact(env.output.err, shown(p.head.impact))
    if not typer.confirm(f"{what}?", default=False, err=True):
        raise NotConfirmed("not confirmed: nothing was written")
