"""``nereus engine``: start, stop and ask the daemon that owns this home's shards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from nereus.cli.context import Env
from nereus.cli.output import Answered
from nereus.errors import EngineUnreachable, ExitCode

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(help="Start, stop and query the engine daemon.", no_args_is_help=True)


@app.command("start")
def start(
    ctx: typer.Context,
    foreground: Annotated[bool, typer.Option(
        "--foreground", help="Stay attached (for systemd and tests); logs also to the console.")]
    = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the engine to be ready.")]
    = 60.0,
    workers: Annotated[int | None, typer.Option(
        min=1, max=256, envvar="NEREUS_WORKERS", show_default=False,
        help="Worker processes sharing the home's shards (each a member of the home's "
        "embedded cluster, or of the cluster this home is a node of); the admin socket "
        "stays the one entry point. Default: [engine] workers, else one per core, at most "
        "one per shard; 1 runs the single daemon.")] = None,
) -> None:
    """Start the daemon (admin socket at <home>/run/admin.sock)."""
    import msgspec

    from nereus.adapters.admin.engine_process import start_engine

    env: Env = ctx.obj
    env.config  # noqa: B018 - fail early and clearly when the home has no valid config
    if foreground:
        from nereus.engine.hosting.daemon import run_daemon

        status = run_daemon(env.home.resolve(), foreground=True, workers=workers,
                            worker=None)  # the daemon said why on stderr
        if status:
            raise Answered(ExitCode(status))
        return
    data = msgspec.to_builtins(start_engine(env.layout, timeout, env.output.warn,
                                                 workers=workers))
    env.output.emit(data, lambda out: out.print(
        f"engine started (pid {data['pid']}) with {len(data['shards'])} shard(s); "
        f"socket {data['socket']}, log {data['log']}"))


@app.command("stop")
def stop(
    ctx: typer.Context,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a graceful stop.")] = 60.0,
) -> None:
    """Stop the daemon gracefully: in-flight publishes settle or are recorded UNKNOWN."""
    import msgspec

    from nereus.adapters.admin.engine_process import stop_engine

    env: Env = ctx.obj
    data = msgspec.to_builtins(stop_engine(env.layout, timeout))
    env.output.emit(data, lambda out: out.print(
        f"engine stopped (pid {data['pid']})" if data["stopped"] else "the engine is not running"))


def _lane_notes(out: Console, lanes: list[dict[str, Any]]) -> None:
    """A line per lane with UNCERTAIN attempts, and per lane that does not fence."""
    from nereus.timespec import format_duration_ms

    for lane in lanes:
        if lane.get("uncertain"):
            age = format_duration_ms(lane.get("uncertain_oldest_age_ms") or 0)
            out.print(f"{lane['lane']}: {lane['uncertain']:,} attempt(s) UNCERTAIN, the "
                      f"oldest for {age} (the settle-lane-uncertain playbook settles them)")
        if lane.get("destination") and not lane.get("fencing"):
            out.print(f"{lane['lane']} does not fence a dead owner's sends: after a crash its "
                      "in-flight attempts stay UNCERTAIN (`fencing = true`)")


@app.command("status")
def status(ctx: typer.Context) -> None:
    """Is the engine running; its shards, lanes and clock."""
    env: Env = ctx.obj
    try:
        data = env.admin().get("/v1/status")
    except EngineUnreachable as exc:
        _why_unreachable(env, exc)
    env.output.emit(data, lambda out: _print_status(out, data))
    if not data["healthy"]:
        raise Answered(ExitCode.NO)


def _why_unreachable(env: Env, exc: EngineUnreachable) -> NoReturn:
    """The engine does not answer: say whether one runs (its socket deleted under it, or
    holding the home without answering) or none does (the error document says so too)."""
    from nereus.adapters.home.home_lock import (
        is_locked,
        lock_holder,
        orphaned_engine,
        socket_lost,
    )

    if (orphan := orphaned_engine(env.home)) is not None:  # its socket deleted under it
        lost = socket_lost(env.home, orphan)
        raise EngineUnreachable(lost.message, hint=lost.hint,
                                document={"running": True}) from None
    if is_locked(env.home):  # a daemon holds the home: running, but not answering
        pid = lock_holder(env.home)
        raise EngineUnreachable(
            f"the engine (pid {pid or '?'}) runs but does not answer on its admin "
            f"socket: {exc.message}",
            hint="it may still be starting; if it stays so, `nereus engine logs --level "
            "error` says why and `nereus engine stop` stops it",
            document={"running": True}) from None
    # the error document (--json) says "not running" too
    raise EngineUnreachable(exc.message, hint=exc.hint,
                            document={"running": False}) from None


def _print_status(out: Console, data: dict[str, Any]) -> None:
    """The status document as tables: shards, lanes, workers in trouble, problems."""
    from rich.table import Table

    trusted = data["trusted_time"]
    held = trusted.get("held_back_ms") or 0
    out.print(f"engine running as {data['owner_id']} since {data['started_at']}; "
              f"Trusted UTC ±{trusted['uncertainty_ms'] // 2} ms"
              + (f", held {held:,} ms behind the wall clock" if held else ""))
    shards = Table("shard", "state", "applied", "lag", "in flight", "uncertain")
    for s in data["shards"]:
        shards.add_row(s["shard"], s["state"], str(s["applied_position"]), str(s["lag"]),
                       str(s["in_flight"]), str(s["uncertain"]))
    out.print(shards)
    for s in data["shards"]:
        if s.get("waiting"):
            out.print(f"{s['shard']} admits nothing now: {s['waiting']}")
    lanes = Table("lane", "gate", "readiness", "due backlog", "published",
                  "failures since start")
    for lane in data["lanes"]:
        lanes.add_row(lane["lane"], lane["gate"], lane["readiness"],
                      f"{lane['due_backlog']}{'+' if lane.get('due_backlog_capped') else ''}",
                      str(lane["published"]),
                      str(lane["failures"]))
    out.print(lanes)
    _lane_notes(out, data["lanes"])
    troubled = [w for w in data.get("workers", [])
                if w["restarts"] or w["state"] not in ("RUNNING", "STOPPED")]
    if troubled:
        workers = Table("worker", "state", "restarts", "last error", "at")
        for w in troubled:
            workers.add_row(w["name"], w["state"], str(w["restarts"]),
                            w["last_error"] or "", w["last_error_at"] or "")
        out.print(workers)
    else:
        out.print(f"{len(data.get('workers', []))} workers running, none restarted")
    for problem in data["problems"]:
        out.print(f"[red]not healthy:[/red] {problem}")
