"""A home's file Shard Log for tests that append records as a client would: the route
identity from the home's nereus.toml is checked (and written into an empty log) first,
exactly as the CLI's appends do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.identity import ensure_route_identity
from nereus.config import parse_config
from nereus.shard import ShardId


def home_log(home: Path, shard: ShardId, **options: Any) -> FileShardLog:
    """``shard``'s file log in ``home``, its first record the route identity."""
    config = parse_config((home / "nereus.toml").read_text())
    log = FileShardLog(home / "shardlog" / shard.route / str(shard.partition), **options)
    ensure_route_identity(log, config.route(shard.route).identity(shard.partition),
                          where=f"{home}'s log of {shard}")
    return log
