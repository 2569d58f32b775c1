"""``nereus attempt``: open publish attempts (PUBLISHING and UNKNOWN) and their evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli import mutation as mutation_opts
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.shard import ShardId

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


@app.command("resolve")
def resolve(
    ctx: typer.Context,
    attempt_id: Annotated[str, typer.Argument(metavar="ATTEMPT", help="The UNKNOWN attempt.")],
    evidence: Annotated[str, typer.Option(
        "--evidence", help="What proves the outcome (broker offset, consumer check, ticket).")],
    reason: mutation_opts.ReasonOpt,
    published: Annotated[bool | None, typer.Option(
        "--published/--not-published",
        help="The message was published (settle it PUBLISHED) or not (back to the timeline "
             "for a retry, or FAILED when no retries are left).")] = None,
    shard: Annotated[str | None, typer.Option(
        "--shard", help="The attempt's shard (default: found by looking it up).")] = None,
    operator: mutation_opts.AsOpt = None,
    key: mutation_opts.KeyOpt = None,
    precondition: mutation_opts.PreconditionOpt = None,
    dry_run: mutation_opts.DryRunOpt = False,
    yes: mutation_opts.YesOpt = False,
    wait: mutation_opts.WaitOpt = False,
) -> None:
    """Settle an UNKNOWN attempt with evidence (ATTEMPT_RESOLVE; asks for confirmation)."""
    from nereus.cli import mutation
    from nereus.errors import UsageError
    from nereus.records import AttemptResolve, Resolution

    env: Env = ctx.obj
    if published is None:
        raise UsageError("say what the evidence shows: --published or --not-published")
    if not evidence.strip():
        raise UsageError("--evidence must say what proves the outcome")
    who = mutation.identity(operator, reason, key, precondition)
    target = env.shard(shard) if shard else _attempt_shard(env, attempt_id)
    resolution = Resolution.PUBLISHED if published else Resolution.NOT_PUBLISHED
    mutation.run(env, build=lambda _shard: AttemptResolve(
        attempt_id=attempt_id, resolution=resolution, evidence=evidence,
        operator=who.operator, reason=who.reason, precondition_digest=who.precondition),
        shards=[target], who=who, dry_run=dry_run, yes=yes, wait=wait)


def _attempt_shard(env: Env, attempt_id: str) -> ShardId:
    """The shard holding ``attempt_id``: asked of the engine (open attempts), else read from
    each database (read-only, safe beside a running engine; it also finds settled attempts,
    so re-running a resolve that applied reports its first result)."""
    from nereus.cli.mutation import every_shard
    from nereus.errors import NotFound
    from nereus.state import keys
    from nereus.state.store import ShardStore

    if env.engine_running():
        for found in env.admin().get("/v1/attempts")["attempts"]:
            if found["attempt_id"] == attempt_id:
                return env.shard(found["shard"])
    for shard in every_shard(env):
        path = env.layout.shard_state(shard)
        if not (path / "CURRENT").exists():
            continue
        with ShardStore.open(path, read_only=True) as store:
            if store.get(keys.attempt_key(attempt_id)) is not None:
                return shard
    raise NotFound(f"no attempt {attempt_id} on any shard of {env.home}",
                   hint="`nereus attempt list` shows the open ones; give --shard if you know it")
