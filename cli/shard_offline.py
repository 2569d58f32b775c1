"""Reading a shard offline, without Typer: its database opened read-only, where its log
ends, and ``nereus shard inspect`` itself (``inspect_shard``).

The Typer command (``nereus.cli.commands.shard.inspection``) and the console script's lean
path (``nereus.cli.lean``) both call ``inspect_shard``: one implementation of what the
command reads and prints, whichever way the line came in. Nothing here imports Typer, and
Rich only inside the human renderer, so ``--json`` never loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.context import Env
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore


def open_db(env: Env, text: str, db: Path | None, *,
            lazy_indexes: bool = False) -> tuple[ShardId, ShardStore]:
    """Shard ``text`` and its database, read-only: ``db`` (any shard database, the shard
    name only parsed), else the home's live one (the shard checked against the config).
    ``lazy_indexes``: for a few reads (``ShardStore.open``)."""
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Identity

    shard = ShardId.parse(text) if db is not None else env.shard(text)
    path = db if db is not None else env.layout.shard_state(shard)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    return shard, ShardStore.open(path, identity=identity, read_only=True,
                                  lazy_indexes=lazy_indexes)


def log_end(env: Env, shard: ShardId) -> int | None:
    """Where ``shard``'s log ends, or None when this home has no log of it to read. A file
    log is read as a reader sees it (``FileShardLog.observed_end_position``: no append
    lock, bounded work), a broker's log asked."""
    if env.layout.config.exists() and (env.layout.shard_log(shard).is_dir() or
                                       env.config.route(shard.route).log != "file"):
        log = env.shard_log(shard, create=False)
        from nereus.adapters.shardlog.file import FileShardLog

        if isinstance(log, FileShardLog):
            return log.observed_end_position()
        return log.end_position()
    return None


def inspect_shard(env: Env, shard_name: str, db: Path | None) -> None:
    """``nereus shard inspect``: the report of the shard's database (``--db``, else the
    home's live one), printed through ``env.output``."""
    import msgspec

    from nereus.inspection import inspect_store

    shard, store = open_db(env, shard_name, db, lazy_indexes=True)
    with store:
        report = inspect_store(store, log_end_position=log_end(env, shard))
    path, applied = report.db.path, report.applied_position
    data = msgspec.to_builtins(report)

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
        out.print(_disk_line(data["disk"]))

    env.output.emit(data, human)


def _mb(count: int | None) -> str:
    return "?" if count is None else f"{count / 1e6:,.1f} MB"


def _disk_line(disk: dict[str, Any]) -> str:
    """Disk use in one line; the terminal-retained figure says it is an estimate."""
    oldest = disk["oldest_retained"]
    retained = ("none" if oldest is None else
                f"{oldest['kind']} {oldest['id']} until {oldest['expire_at']}")
    return (f"disk: live {_mb(disk['live_bytes'])}, obsolete {_mb(disk['obsolete_bytes'])} "
            f"(SST {_mb(disk['sst_bytes'])} + WAL {_mb(disk['wal_bytes'])} - live), "
            f"terminal retained ~{_mb(disk['terminal_retained_bytes'])} (estimate, "
            f"{disk['terminal_messages']} terminal messages); oldest retained: {retained}")
