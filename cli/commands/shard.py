"""``nereus shard``: offline tools over a shard's log and database.

None of these need a running engine. ``--db`` points at any shard database (a replay
output, a restored checkpoint); without it the home's live database is used, opened
read-only so it is safe beside a running engine.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

app = typer.Typer(help="Inspect, replay and digest shards offline.", no_args_is_help=True)

ShardArg = Annotated[str, typer.Argument(metavar="SHARD", help="ROUTE/PARTITION, e.g. default/0.")]
DbOption = Annotated[Path | None, typer.Option(
    "--db", help="A shard database directory (default: the home's live database).")]


def _open_db(env: Env, text: str, db: Path | None) -> tuple[ShardId, ShardStore]:
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Identity

    shard = ShardId.parse(text) if db is not None else env.shard(text)
    path = db if db is not None else env.layout.shard_state(shard)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    return shard, ShardStore.open(path, identity=identity, read_only=True)


@app.command("replay")
def replay(
    ctx: typer.Context,
    shard_name: ShardArg,
    empty: Annotated[bool, typer.Option("--empty", help="Start from an empty state.")] = False,
    from_checkpoint: Annotated[str | None, typer.Option(
        "--from-checkpoint", metavar="ID", help="Start from a checkpoint.")] = None,
    to: Annotated[int | None, typer.Option("--to", metavar="POS",
                                           help="Stop after applying this position.")] = None,
    into: Annotated[Path | None, typer.Option(
        "--into", help="Write the database here (default: a temporary directory).")] = None,
    log_dir: Annotated[Path | None, typer.Option(
        "--log-dir", help="Read the log from this directory instead of the home.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty --into.")] = False,
) -> None:
    """Apply the shard's log offline, deterministically, and print the digest."""
    from nereus.engine.replay import replay_empty
    from nereus.errors import UsageError
    from nereus.shard import ShardId

    env: Env = ctx.obj
    if from_checkpoint is not None:
        raise UsageError("--from-checkpoint needs checkpoints, which this build does not have yet",
                         hint="use --empty")
    if not empty:
        raise UsageError("say where replay starts: --empty")
    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    limits = env.config.limits if env.layout.config.exists() else None
    log = env.file_log(shard, directory=log_dir, create=False)
    total = log.end_position()
    if to is not None:
        total = min(total, to + 1)
    scratch = None
    if into is None:
        scratch = tempfile.TemporaryDirectory(prefix="nereus-replay-")
        target = Path(scratch.name) / "db"
    else:
        target = into
    from nereus.machine import DEFAULT_LIMITS

    try:
        with env.output.progress(f"replaying {shard}", total) as advance:
            report = replay_empty(log, shard, target, limits=limits or DEFAULT_LIMITS,
                                  stop_at=to, replace=force, progress=advance)
    finally:
        log.close()
    data: dict[str, Any] = {
        "shard": str(shard),
        "records_applied": report.records,
        "applied_position": report.applied_position,
        "digest": report.digest,
        "into": None if scratch else str(report.into),
    }
    if scratch is not None:
        scratch.cleanup()

    def human(out: Console) -> None:
        out.print(f"replayed {report.records} record(s) of {shard} "
                  f"(applied position {report.applied_position})")
        out.print(f"  digest {report.digest}")
        if data["into"]:
            out.print(f"  database {data['into']}")

    env.output.emit(data, human)


@app.command("digest")
def digest(ctx: typer.Context, shard_name: ShardArg, db: DbOption = None) -> None:
    """Print the order-independent digest of the shard's replicated state."""
    from nereus.engine.replay import store_digest

    env: Env = ctx.obj
    shard, store = _open_db(env, shard_name, db)
    with store:
        data = {"shard": str(shard), "digest": store_digest(store),
                "applied_position": store.applied_position(), "db": str(store.path)}
    env.output.emit(data, lambda out: out.print(
        f"{data['shard']} digest {data['digest']} at applied position {data['applied_position']}"
    ))


@app.command("inspect")
def inspect(ctx: typer.Context, shard_name: ShardArg, db: DbOption = None) -> None:
    """Identity, applied position, lag, messages by state, lanes, timeline head, obligations."""
    from nereus.inspection import inspect_store
    from nereus.timespec import format_time_ms

    env: Env = ctx.obj
    shard, store = _open_db(env, shard_name, db)
    with store:
        report = inspect_store(store)
        path = str(store.path)
    log_end = None
    if env.layout.config.exists() and env.layout.shard_log(shard).is_dir():
        log_end = env.file_log(shard, create=False).end_position()
    applied = report.applied_position
    data = report.to_dict()
    data["timeline_head"] = (None if report.timeline_head_ms is None
                             else format_time_ms(report.timeline_head_ms))
    for lane in data["lanes"]:
        lane["next_due"] = None if lane["next_due_ms"] is None else format_time_ms(
            lane["next_due_ms"])
    data["log_end_position"] = log_end
    data["lag"] = None if log_end is None else log_end - (0 if applied is None else applied + 1)
    data["db"] = {"path": path, "estimated_keys": data.pop("estimated_keys"),
                  "live_data_bytes": data.pop("live_data_bytes")}

    def human(out: Console) -> None:
        from rich.table import Table

        out.print(f"[bold]shard {data['shard']}[/bold]  schema v{data['schema_version']}  "
                  f"db {path}")
        lag = "unknown (no log here)" if data["lag"] is None else str(data["lag"])
        out.print(f"applied position {applied}  records applied {data['records_applied']}  "
                  f"lag {lag}")
        out.print(f"timeline head {data['timeline_head'] or '-'}  open obligations "
                  f"{data['open_obligations']}  paused {data['paused']}")
        states = Table(title="messages by state")
        for state in data["messages_by_state"]:
            states.add_column(state, justify="right")
        states.add_row(*(str(n) for n in data["messages_by_state"].values()))
        out.print(states)
        lanes = Table(title="lanes")
        for column in ("lane", "gate", "scheduled", "open attempts", "next due"):
            lanes.add_column(column)
        for lane in data["lanes"]:
            lanes.add_row(lane["lane"], lane["gate"],
                          str(lane["messages_by_state"]["SCHEDULED"]),
                          str(lane["open_attempts"]), lane["next_due"] or "-")
        out.print(lanes)

    env.output.emit(data, human)


@app.command("list")
def list_shards(ctx: typer.Context) -> None:
    """Every shard of the home: state, applied position, log end, lag (engine or offline)."""
    env: Env = ctx.obj
    if env.engine_running():
        shards = env.admin().get("/v1/shards")["shards"]
    else:
        shards = _offline_shards(env)

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("shard", "state", "applied", "log end", "lag")
        for s in shards:
            table.add_row(s["shard"], s["state"], str(s["applied_position"]),
                          str(s["log_end_position"]), str(s["lag"]))
        out.print(table)

    env.output.emit(shards, human)


def _offline_shards(env: Env) -> list[dict[str, Any]]:
    from nereus.errors import NereusError
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

    out = []
    for route in env.config.routes.values():
        for partition in range(route.partitions):
            shard = ShardId(route.name, partition)
            applied = None
            state = "STOPPED"
            try:
                with ShardStore.open(env.layout.shard_state(shard), read_only=True) as store:
                    applied = store.applied_position()
            except NereusError:
                state = "NO_STATE"
            end = None
            if route.log == "file" and env.layout.shard_log(shard).is_dir():
                end = env.file_log(shard, create=False).end_position()
            lag = None if end is None else end - (0 if applied is None else applied + 1)
            out.append({"shard": str(shard), "state": state, "applied_position": applied,
                        "log_end_position": end, "lag": lag})
    return out
