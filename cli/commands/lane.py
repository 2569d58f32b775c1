"""``nereus lane``: destination lanes, their gates and readiness."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from nereus.cli import mutation as mutation_opts
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(help="Destination lanes: gates, readiness, backlog.", no_args_is_help=True)


@app.command("list")
def list_lanes(ctx: typer.Context) -> None:
    """Every lane: admissionGate, readiness, due backlog, in flight, its messages published
    (the shards' replicated counts: a restart keeps them), failed publish calls since the
    engine started, and its unfinished messages by why they wait (needs the engine;
    `message explain ID` for one message)."""
    env: Env = ctx.obj
    lanes = env.admin().get("/v1/lanes")["lanes"]

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("lane", "destination", "gate", "readiness", "due backlog", "in flight",
                      "published", "failures since start")
        for lane in lanes:
            readiness = lane["readiness"] + (
                f" ({lane['not_ready_reason']})" if lane["not_ready_reason"] else "")
            table.add_row(lane["lane"], lane["destination"], lane["gate"], readiness,
                          f"{lane['due_backlog']}{'+' if lane.get('due_backlog_capped') else ''}",
                          str(lane["in_flight"]),
                          str(lane["published"]), str(lane["failures"]))
        out.print(table)
        for lane in lanes:
            waiting = lane.get("waiting_by_reason") or {}
            if waiting:
                out.print(f"{lane['lane']} waiting: " + "; ".join(
                    f"{n:,} {why}" for why, n in sorted(waiting.items(), key=lambda i: -i[1])),
                    soft_wrap=True)

    env.output.emit(lanes, human)


ShardsOpt = Annotated[list[str] | None, typer.Option(
    "--shard", help="Only this shard (repeatable; default: every shard of every route).")]


def _gate(ctx: typer.Context, lane: str, gate: str, *, shard: list[str] | None, reason: str,
          operator: str | None, key: str | None, precondition: str | None, dry_run: bool,
          yes: bool, wait: bool) -> None:
    from nereus.cli import mutation
    from nereus.records import Gate, LaneGate

    env: Env = ctx.obj
    _known_lane(env, lane)
    who = mutation.identity(operator, reason, key, precondition)
    mutation.run(env, build=lambda _shard: LaneGate(
        lane=lane, gate=Gate(gate), operator=who.operator, reason=who.reason,
        precondition_digest=who.precondition), shards=mutation.every_shard(env, shard),
        who=who, dry_run=dry_run, yes=yes, wait=wait)


def _known_lane(env: Env, lane: str) -> None:
    from nereus.errors import NotFound

    if lane not in env.config.lanes:
        known = ", ".join(sorted(env.config.lanes)) or "none"
        raise NotFound(f"no lane {lane!r} in {env.config.source} (configured: {known})")


LaneArg = Annotated[str, typer.Argument(help="The lane.")]


class GateCommand(Protocol):
    """``lane close`` and ``lane open``: the signature Typer reads."""

    def __call__(self, ctx: typer.Context, lane: str, reason: str, operator: str | None = None,
                 key: str | None = None, precondition: str | None = None,
                 shard: list[str] | None = None, dry_run: bool = False, yes: bool = False,
                 wait: bool = False) -> None: ...


def _gate_command(gate: str, summary: str) -> GateCommand:
    """The ``lane close`` or ``lane open`` command: one signature, one gate each."""

    def command(
        ctx: typer.Context,
        lane: LaneArg,
        reason: mutation_opts.ReasonOpt,
        operator: mutation_opts.AsOpt = None,
        key: mutation_opts.KeyOpt = None,
        precondition: mutation_opts.PreconditionOpt = None,
        shard: ShardsOpt = None,
        dry_run: mutation_opts.DryRunOpt = False,
        yes: mutation_opts.YesOpt = False,
        wait: mutation_opts.WaitOpt = False,
    ) -> None:
        _gate(ctx, lane, gate, shard=shard, reason=reason, operator=operator, key=key,
              precondition=precondition, dry_run=dry_run, yes=yes, wait=wait)

    command.__doc__ = summary
    return command


app.command("close")(_gate_command(
    "CLOSED", "Close a lane's admissionGate: no new Publish Admission (asks for confirmation)."))
app.command("open")(_gate_command(
    "OPEN", "Open a lane's admissionGate again: due messages are admitted and published."))


@app.command("set")
def set_policy(
    ctx: typer.Context,
    lane: Annotated[str, typer.Argument(help="The lane to change.")],
    reason: mutation_opts.ReasonOpt,
    capacity: Annotated[int | None, typer.Option(
        "--capacity", min=1, max=1_000_000,
        help="Most open attempts (PUBLISHING + UNKNOWN) in the lane.")] = None,
    quota: Annotated[int | None, typer.Option(
        "--quota", min=1, max=10_000_000,
        help="Most admissions per second (a token bucket with one second of burst), "
        "decided by the Shard Log's broker time.")] = None,
    retry_max: Annotated[int | None, typer.Option(
        "--retry-max", min=1, max=1_000_000,
        help="Attempts before a retriable failure becomes FAILED.")] = None,
    retry_backoff_ms: Annotated[int | None, typer.Option(
        "--retry-backoff-ms", min=0, max=86_400_000,
        help="Base of the exponential retry backoff, ms.")] = None,
    unavailable_max: Annotated[int | None, typer.Option(
        "--unavailable-max", min=1, max=1_000_000,
        help="Attempts that never reached the destination (declined "
        "while the lane was unavailable) before the message is FAILED.")] = None,
    operator: mutation_opts.AsOpt = None,
    key: mutation_opts.KeyOpt = None,
    precondition: mutation_opts.PreconditionOpt = None,
    shard: ShardsOpt = None,
    dry_run: mutation_opts.DryRunOpt = False,
    yes: mutation_opts.YesOpt = False,
    wait: mutation_opts.WaitOpt = False,
) -> None:
    """Change a lane's capacity, quota or retry policy (LANE_CONFIG).

    Ordering and the handoff lead are set in nereus.toml ([lanes.NAME] ordered, lead_ms):
    they decide where messages are placed and when they may be handed over, so the engine
    replicates them from there."""
    from nereus.cli import mutation
    from nereus.errors import UsageError
    from nereus.records import LaneConfig

    env: Env = ctx.obj
    _known_lane(env, lane)
    changes = {"capacity": capacity, "quota": quota, "retry_max": retry_max,
               "retry_backoff_ms": retry_backoff_ms, "unavailable_max": unavailable_max}
    if all(value is None for value in changes.values()):
        raise UsageError("nothing to change: give --capacity, --quota, --retry-max, "
                         "--retry-backoff-ms or --unavailable-max")
    who = mutation.identity(operator, reason, key, precondition)
    mutation.run(env, build=lambda _shard: LaneConfig(
        lane=lane, operator=who.operator, reason=who.reason,
        precondition_digest=who.precondition, **changes),  # type: ignore[arg-type]
        shards=mutation.every_shard(env, shard), who=who, dry_run=dry_run, yes=yes, wait=wait)
