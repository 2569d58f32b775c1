"""``nereus attempt``: open publish attempts (PUBLISHING and UNKNOWN) and their evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(help="Open publish attempts and their evidence.", no_args_is_help=True)


@app.command("list")
def list_attempts(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option(
        "--state", help="publishing or unknown (default: both).")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="Only this shard.")] = None,
) -> None:
    """Attempts with an open obligation (needs the engine)."""
    from nereus.errors import UsageError

    env: Env = ctx.obj
    if state is not None and state.lower() not in ("publishing", "unknown"):
        raise UsageError(f"--state {state!r}: expected publishing or unknown")
    attempts = env.admin().get("/v1/attempts", state=state, shard=shard)["attempts"]

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("attempt", "shard", "message", "lane", "state", "admitted", "evidence")
        for a in attempts:
            table.add_row(a["attempt_id"], a["shard"], a["delay_message_id"], a["lane"],
                          a["state"], a["admitted_at"], a["evidence"] or "-")
        out.print(table)
        if not attempts:
            out.print("no open attempts")

    env.output.emit(attempts, human)
