"""``nereus lane``: destination lanes, their gates and readiness."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(help="Destination lanes: gates, readiness, backlog.", no_args_is_help=True)


@app.command("list")
def list_lanes(ctx: typer.Context) -> None:
    """Every lane: admissionGate, readiness, due backlog, in flight (needs the engine)."""
    env: Env = ctx.obj
    lanes = env.admin().get("/v1/lanes")["lanes"]

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("lane", "destination", "gate", "readiness", "due backlog", "in flight",
                      "published", "failures")
        for lane in lanes:
            readiness = lane["readiness"] + (
                f" ({lane['not_ready_reason']})" if lane["not_ready_reason"] else "")
            table.add_row(lane["lane"], lane["destination"], lane["gate"], readiness,
                          str(lane["due_backlog"]), str(lane["in_flight"]),
                          str(lane["published"]), str(lane["failures"]))
        out.print(table)

    env.output.emit(lanes, human)
