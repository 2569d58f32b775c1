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

MAX_POSITION = (1 << 63) - 1  # a Shard Log position (Kafka offsets are signed 64-bit)

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
    to: Annotated[int | None, typer.Option("--to", metavar="POS", min=0, max=MAX_POSITION,
                                           help="Stop after applying this position.")] = None,
    into: Annotated[Path | None, typer.Option(
        "--into", help="Write the database here (default: a temporary directory).")] = None,
    log_dir: Annotated[Path | None, typer.Option(
        "--log-dir", help="Read the log from this directory instead of the home.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty --into.")] = False,
    compare: Annotated[str | None, typer.Option(
        "--compare", metavar="live|checkpoint:ID",
        help="Replay up to the live database's (or that checkpoint's) position and compare "
        "digests.")] = None,
) -> None:
    """Apply the shard's log offline, deterministically, and print the digest."""
    from nereus.adapters.replay import replay_empty
    from nereus.errors import UsageError
    from nereus.shard import ShardId

    env: Env = ctx.obj
    if empty == (from_checkpoint is not None):
        raise UsageError("say where replay starts: --empty or --from-checkpoint ID (one)")
    if compare is not None or from_checkpoint is not None:
        _replay_checkpoint(env, shard_name, from_checkpoint, to, into, force, compare, log_dir)
        return
    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    limits = env.config.limits if env.layout.config.exists() else None
    log = env.shard_log(shard, directory=log_dir, create=False)
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
    """Print the canonical digest (key order) of the shard's replicated state."""
    from nereus.adapters.replay import store_digest

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
    if env.layout.config.exists() and (env.layout.shard_log(shard).is_dir() or
                                       env.config.route(shard.route).log != "file"):
        log_end = env.shard_log(shard, create=False).end_position()
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
            if route.log != "file" or env.layout.shard_log(shard).is_dir():
                end = env.shard_log(shard, create=False).end_position()
            lag = None if end is None else end - (0 if applied is None else applied + 1)
            out.append({"shard": str(shard), "state": state, "applied_position": applied,
                        "log_end_position": end, "lag": lag})
    return out


def _log_entry(record: Any) -> dict[str, Any]:
    from nereus.records import decode, kind_of
    from nereus.records.codec import DecodeFailure
    from nereus.records.summary import record_ids, summarize
    from nereus.timespec import format_time_ms

    decoded = decode(record.payload)
    entry: dict[str, Any] = {"position": record.position,
                             "broker_time": format_time_ms(record.broker_ms),
                             "broker_ms": record.broker_ms}
    if isinstance(decoded, DecodeFailure):
        where = f" at byte {decoded.at_byte}" if decoded.at_byte is not None else (
            f" at {decoded.field}" if decoded.field else "")
        entry.update(kind="UNDECODABLE", ids={},
                     summary=f"{decoded.reason}{where}: {decoded.detail}",
                     size_bytes=len(record.payload))
    else:
        entry.update(kind=kind_of(decoded), ids=record_ids(decoded), summary=summarize(decoded))
    return entry


@app.command("log")
def log_command(
    ctx: typer.Context,
    shard_name: ShardArg,
    from_position: Annotated[int, typer.Option("--from", metavar="POS", min=0, max=MAX_POSITION,
                                               help="First position.")] = 0,
    to_position: Annotated[int | None, typer.Option("--to", metavar="POS", min=0, max=MAX_POSITION,
                                                    help="Last position (inclusive).")] = None,
    kind: Annotated[list[str] | None, typer.Option(
        "--kind", help="Only records of this kind (repeatable), e.g. SCHEDULE, LANE_GATE, "
        "or a class: client, system, operator.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f",
                                         help="Keep printing new records.")] = False,
    log_dir: Annotated[Path | None, typer.Option(
        "--log-dir", help="Read the log from this directory instead of the home.")] = None,
) -> None:
    """Decode the Shard Log: position, broker time, kind, ids, a one-line summary.

    With --json, one JSON object per record (JSON lines).
    """
    import json
    import sys
    import time

    from nereus.errors import UsageError
    from nereus.records import codec
    from nereus.shard import ShardId

    env: Env = ctx.obj
    classes = {
        "client": {str(c.__struct_config__.tag) for c in codec.CLIENT_COMMANDS},
        "system": {str(c.__struct_config__.tag) for c in codec.SYSTEM_MUTATIONS},
        "operator": {str(c.__struct_config__.tag) for c in codec.OPERATOR_MUTATIONS},
    }
    wanted: set[str] | None = None
    if kind:
        wanted = set()
        for item in kind:
            name = item.strip()
            if name.lower() in classes:
                wanted |= classes[name.lower()]
            elif name.upper() in (*codec.ALL_KINDS, "UNDECODABLE"):
                wanted.add(name.upper())
            else:
                raise UsageError(f"--kind {item!r}: expected one of {', '.join(codec.ALL_KINDS)}, "
                                 "UNDECODABLE, client, system or operator")
    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    log = env.shard_log(shard, directory=log_dir, create=False)
    position = from_position
    rows: list[dict[str, Any]] = []
    while True:
        batch = log.read(position, 1000)
        for record in batch:
            if to_position is not None and record.position > to_position:
                batch = []
                follow = False
                break
            entry = _log_entry(record)
            position = record.position + 1
            if wanted is not None and entry["kind"] not in wanted:
                continue
            if env.output.json_mode:
                sys.stdout.write(json.dumps(entry) + "\n")
            elif follow:
                _print_log_row(env, entry)
            else:
                rows.append(entry)
        if env.output.json_mode:
            sys.stdout.flush()
        if not batch:
            if not follow:
                break
            time.sleep(0.2)
    if not env.output.json_mode and not follow:
        for entry in rows:
            _print_log_row(env, entry)
        if not rows:
            env.output.out.print("no records")


def _print_log_row(env: Env, entry: dict[str, Any]) -> None:
    from nereus.terminal_text import escape_controls

    env.output.out.print(escape_controls(f"{entry['position']:>8}  {entry['broker_time']}  "
                                         f"{entry['kind']:<18} {entry['summary']}"),
                         markup=False, highlight=False)


@app.command("dump")
def dump(
    ctx: typer.Context,
    shard_name: ShardArg,
    db: DbOption = None,
    cf: Annotated[str | None, typer.Option(
        "--cf", metavar="NAME", help="Only this family: meta, msg, timeline, result, reject, "
        "attempt, obligation, lane, payload, msgattempt, claim, sched.")] = None,
    prefix: Annotated[str | None, typer.Option(
        "--prefix", help="Only keys of the family starting with this text.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 100,
) -> None:
    """Decode keys and values of the shard database (read-only)."""
    from nereus.errors import UsageError
    from nereus.state import keys
    from nereus.state.decode import decode_entry

    env: Env = ctx.obj
    if prefix is not None and cf is None:
        raise UsageError("--prefix needs --cf (prefixes are within one family)")
    if cf is not None and cf not in keys.FAMILIES:
        raise UsageError(f"--cf {cf!r}: expected one of {', '.join(keys.FAMILIES)}")
    shard, store = _open_db(env, shard_name, db)
    start = keys.FAMILIES[cf] if cf else b"\x00"
    if prefix:
        start += prefix.encode()
    entries: list[dict[str, Any]] = []
    truncated = False
    with store:
        end = keys.prefix_end(start) if cf else None
        for key, value in store.scan(start, end):
            if len(entries) >= limit:
                truncated = True
                break
            entries.append(decode_entry(key, value))
    data = {"shard": str(shard), "count": len(entries), "truncated": truncated,
            "entries": entries}

    def human(out: Console) -> None:
        import json

        for entry in entries:
            out.print(f"[bold]{entry['family']}[/bold] {json.dumps(entry['key'])}")
            out.print(f"  {json.dumps(entry['value'], default=str)}", markup=False)
        out.print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
                  + (f" (more: raise --limit {limit})" if truncated else ""))

    env.output.emit(data, human)


@app.command("prune")
def prune(
    ctx: typer.Context,
    shard_name: ShardArg,
    before: Annotated[int | None, typer.Option(
        "--before", metavar="POS", min=0, max=MAX_POSITION,
        help="Delete segments wholly before this position "
        "(default: the Recovery Floor).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
) -> None:
    """Log retention: delete the log below the Recovery Floor, never above (whole file-log
    segments; Kafka records with DeleteRecords)."""
    import itertools

    from nereus.adapters.checkpoints import check_floor, recovery_floor
    from nereus.adapters.shardlog.file import FileShardLog
    from nereus.adapters.shardlog.protocol import PrunableLog
    from nereus.cli.commands.checkpoint import objects_for
    from nereus.errors import UsageError

    env: Env = ctx.obj
    shard = env.shard(shard_name)
    floor = recovery_floor(objects_for(env), shard, env.config.checkpoints.keep)
    position = floor.position if before is None else before
    check_floor(floor, delete_before=position)
    log = env.shard_log(shard, create=False)
    if not isinstance(log, PrunableLog):
        raise UsageError(f"route {shard.route}'s {env.config.route(shard.route).log} log "
                         "keeps its own retention; nereus does not delete from it")
    if not dry_run:
        deleted = log.delete_before(position)
    elif isinstance(log, FileShardLog):
        deleted = [str(path) for (_, path), (nxt, _) in itertools.pairwise(log.segments())
                   if nxt <= position]
    else:
        start = log.start_position()
        deleted = [f"{getattr(log, 'description', shard)} positions {start}..{position - 1}"
                   ] if position > start else []
    data = {"shard": str(shard), "before": position, "floor_position": floor.position,
            "dry_run": dry_run, "deleted": deleted, "log_start_position": log.start_position()}
    env.output.emit(data, lambda out: out.print(
        f"{'would delete' if dry_run else 'deleted'} {len(deleted)} part(s) of {shard} before "
        f"position {position} (Recovery Floor {floor.position}); log now starts at "
        f"{data['log_start_position']}"))


def _replay_checkpoint(env: Env, shard_name: str, checkpoint_id: str | None, to: int | None,
                       into: Path | None, force: bool, compare: str | None,
                       log_dir: Path | None) -> None:
    """Replay from a checkpoint (or from empty) with an optional digest comparison."""
    import shutil

    from nereus.adapters.checkpoints import download, find
    from nereus.adapters.deep_verify import replay_from
    from nereus.adapters.replay import store_digest
    from nereus.cli.commands.checkpoint import objects_for
    from nereus.errors import NereusError, UsageError
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore, identity_writes
    from nereus.state.values import Identity

    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    log = env.shard_log(shard, directory=log_dir, create=False)
    scratch = Path(tempfile.mkdtemp(prefix="nereus-replay-"))
    try:
        image = scratch / "image"
        start_id = None
        if checkpoint_id is not None:
            entry = find(objects_for(env), checkpoint_id)
            if (entry.route, entry.partition) != (shard.route, shard.partition):
                raise UsageError(f"checkpoint {checkpoint_id} belongs to shard "
                                 f"{entry.route}/{entry.partition}, not {shard}")
            download(objects_for(env), entry, image)
            start_id = entry.checkpoint_id
        else:
            identity = Identity(route=shard.route, partition=shard.partition,
                                schema_version=keys.SCHEMA_VERSION)
            with ShardStore.open(image, create=True) as empty_store:
                empty_store.write(identity_writes(identity))
        target, expected, against = to, None, None
        if compare == "live":
            with ShardStore.open(env.layout.shard_state(shard), read_only=True) as live:
                target, expected = live.applied_position(), store_digest(live)
            against = "the live database"
        elif compare is not None and compare.startswith("checkpoint:"):
            other = find(objects_for(env), compare.split(":", 1)[1])
            target, expected = other.applied_position, other.digest
            against = f"checkpoint {other.checkpoint_id}"
        elif compare is not None:
            raise UsageError(f"--compare {compare!r}: expected live or checkpoint:ID")
        destination = into or scratch / "db"
        if destination.exists() and any(destination.iterdir()):
            if not force:
                raise NereusError(f"{destination} is not empty",
                                  hint="choose an empty directory, or pass --force")
            shutil.rmtree(destination)
        with env.output.progress(f"replaying {shard}", None) as advance:
            records, digest = replay_from(image, destination, log, limits=env.config.limits,
                                          stop_at=target, progress=advance)
        with ShardStore.open(destination, read_only=True) as result:
            applied = result.applied_position()
    finally:
        log.close()
    data: dict[str, Any] = {
        "shard": str(shard), "from_checkpoint": start_id, "records_applied": records,
        "applied_position": applied, "digest": digest,
        "into": str(into) if into else None,
    }
    if expected is not None:
        data.update(compare=against, expected_digest=expected, match=digest == expected)
    shutil.rmtree(scratch, ignore_errors=True)

    def human(out: Console) -> None:
        origin = f"checkpoint {start_id}" if start_id else "empty"
        out.print(f"replayed {records} record(s) of {shard} from {origin} "
                  f"(applied position {applied})")
        out.print(f"  digest {digest}")
        if expected is not None:
            verdict = "[green]matches[/green]" if digest == expected else "[red]DIFFERS from[/red]"
            out.print(f"  {verdict} {against} ({expected[:16]}..)")

    env.output.emit(data, human)
    if expected is not None and digest != expected:
        raise typer.Exit(1)
