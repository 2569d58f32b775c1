"""``nereus shard inspect | list | log | dump``: read a shard's database and log as they
are, without changing either (the database is opened read-only, safe beside a running
engine)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.commands.shard.options import MAX_POSITION, DbOption, ShardArg, open_db
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.backends.shardlog.protocol import ShardLog
    from nereus.cli.commands.shard.documents import OfflineShard
    from nereus.records.summary import LogEntry


def inspect(ctx: typer.Context, shard_name: ShardArg, db: DbOption = None) -> None:
    """Identity, applied position, lag, messages by state, lanes, timeline head, obligations,
    disk use (live, obsolete, terminal-retained estimate, oldest retained item)."""
    from nereus.cli.shard_offline import inspect_shard

    inspect_shard(ctx.obj, shard_name, db)


def list_shards(ctx: typer.Context) -> None:
    """Every shard of the home: state, applied position, log end, lag (engine or offline)."""
    import msgspec

    from nereus.adapters.admin.wire import ShardView

    env: Env = ctx.obj
    shards: list[ShardView] | list[OfflineShard]
    if env.engine_running():
        shards = msgspec.convert(env.admin().get("/v1/shards")["shards"], list[ShardView])
    else:
        shards = _offline_shards(env)
    rows = msgspec.to_builtins(shards)

    def human(out: Console) -> None:
        from rich.table import Table

        table = Table("shard", "state", "applied", "log end", "lag")
        for s in rows:
            table.add_row(s["shard"], s["state"], str(s["applied_position"]),
                          str(s["log_end_position"]), str(s["lag"]))
        out.print(table)

    env.output.emit(rows, human)


def _offline_shards(env: Env) -> list[OfflineShard]:
    from nereus.cli.commands.shard.documents import OfflineShard
    from nereus.cli.shard_offline import log_end
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
                with ShardStore.open(env.layout.shard_state(shard), read_only=True,
                                     lazy_indexes=True) as store:
                    applied = store.applied_position()
            except NereusError:
                state = "NO_STATE"
            end = log_end(env, shard)
            lag = None if end is None else end - (0 if applied is None else applied + 1)
            out.append(OfflineShard(shard=str(shard), state=state, applied_position=applied,
                                    log_end_position=end, lag=lag))
    return out


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
    from nereus.shard import ShardId

    env: Env = ctx.obj
    wanted = _wanted_kinds(kind)
    shard = ShardId.parse(shard_name) if log_dir is not None else env.shard(shard_name)
    log = env.shard_log(shard, directory=log_dir, create=False)
    rows, follow = _read_log(env, log, from_position, to_position, wanted, follow)
    if not env.output.json_mode and not follow:
        for entry in rows:
            _print_log_row(env, entry)
        if not rows:
            env.output.out.print("no records")


def _read_log(env: Env, log: ShardLog, position: int, to_position: int | None,
              wanted: set[str] | None, follow: bool) -> tuple[list[LogEntry], bool]:
    """Read from ``position``: each wanted record written at once as a JSON line (or, when
    following, as a row), else kept for the table returned; with ``follow`` until Ctrl-C
    or past ``to_position`` (then ``follow`` comes back False)."""
    import json
    import sys
    import time

    import msgspec

    from nereus.records.summary import log_entries

    rows: list[LogEntry] = []
    while True:
        batch = log.read(position, 1000)
        for record in batch:
            if to_position is not None and record.position > to_position:
                batch = []
                follow = False
                break
            position = record.position + 1
            for entry in log_entries(record.position, record.broker_ms, record.payload):
                if wanted is not None and entry.kind not in wanted:
                    continue
                if env.output.json_mode:
                    sys.stdout.write(json.dumps(msgspec.to_builtins(entry)) + "\n")
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
    return rows, follow


def _wanted_kinds(kind: list[str] | None) -> set[str] | None:
    """The record kinds ``--kind`` asks for (a class names its kinds); None: every kind."""
    from nereus.errors import UsageError
    from nereus.records import codec

    classes = {
        "client": {str(c.__struct_config__.tag) for c in codec.CLIENT_COMMANDS},
        "system": {str(c.__struct_config__.tag) for c in codec.SYSTEM_MUTATIONS},
        "operator": {str(c.__struct_config__.tag) for c in codec.OPERATOR_MUTATIONS},
    }
    if not kind:
        return None
    wanted: set[str] = set()
    for item in kind:
        name = item.strip()
        if name.lower() in classes:
            wanted |= classes[name.lower()]
        elif name.upper() in (*codec.ALL_KINDS, "UNDECODABLE"):
            wanted.add(name.upper())
        else:
            raise UsageError(f"--kind {item!r}: expected one of {', '.join(codec.ALL_KINDS)}, "
                             "UNDECODABLE, client, system or operator")
    return wanted


def _print_log_row(env: Env, entry: LogEntry) -> None:
    from nereus.terminal_text import escape_controls

    # a PUBLISH_BATCH's member shows as position.index
    where = f"{entry.position}.{entry.member}" if isinstance(entry.member, int) else \
        str(entry.position)
    env.output.out.print(escape_controls(f"{where:>8}  {entry.broker_time}  "
                                         f"{entry.kind:<18} {entry.summary}"),
                         markup=False, highlight=False)


def dump(
    ctx: typer.Context,
    shard_name: ShardArg,
    db: DbOption = None,
    cf: Annotated[str | None, typer.Option(
        "--cf", metavar="NAME", help="Only this family: meta, msg, timeline, result, reject, "
        "attempt, obligation, lane, payload, msgattempt, retain, claim, sched.")] = None,
    prefix: Annotated[str | None, typer.Option(
        "--prefix", help="Only keys of the family starting with this text.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 100,
) -> None:
    """Decode keys and values of the shard database (read-only)."""
    import msgspec

    from nereus.cli.commands.shard.documents import ShardDump
    from nereus.errors import UsageError
    from nereus.state import keys
    from nereus.state.decode import DumpEntry, decode_entry

    env: Env = ctx.obj
    if prefix is not None and cf is None:
        raise UsageError("--prefix needs --cf (prefixes are within one family)")
    if cf is not None and cf not in keys.FAMILIES:
        raise UsageError(f"--cf {cf!r}: expected one of {', '.join(keys.FAMILIES)}")
    shard, store = open_db(env, shard_name, db)
    start = keys.FAMILIES[cf] if cf else b"\x00"
    if prefix:
        start += prefix.encode()
    entries: list[DumpEntry] = []
    truncated = False
    with store:
        end = keys.prefix_end(start) if cf else None
        for key, value in store.scan(start, end):
            if len(entries) >= limit:
                truncated = True
                break
            entries.append(decode_entry(key, value))
    data = msgspec.to_builtins(ShardDump(shard=str(shard), count=len(entries),
                                         truncated=truncated, entries=entries))

    def human(out: Console) -> None:
        import json

        for entry in entries:
            out.print(f"[bold]{entry.family}[/bold] {json.dumps(entry.key)}")
            out.print(f"  {json.dumps(entry.value, default=str)}", markup=False)
        out.print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
                  + (f" (more: raise --limit {limit})" if truncated else ""))

    env.output.emit(data, human)
