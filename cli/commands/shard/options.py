"""What the ``nereus shard`` commands share: the SHARD argument, ``--db``, the largest
position, and opening a shard database read-only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore

MAX_POSITION = (1 << 63) - 1  # a Shard Log position (Kafka offsets are signed 64-bit)

ShardArg = Annotated[str, typer.Argument(metavar="SHARD", help="ROUTE/PARTITION, e.g. default/0.")]
DbOption = Annotated[Path | None, typer.Option(
    "--db", help="A shard database directory (default: the home's live database).")]


def open_db(env: Env, text: str, db: Path | None) -> tuple[ShardId, ShardStore]:
    """Shard ``text`` and its database, read-only: ``db`` (any shard database, the shard
    name only parsed), else the home's live one (the shard checked against the config)."""
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Identity

    shard = ShardId.parse(text) if db is not None else env.shard(text)
    path = db if db is not None else env.layout.shard_state(shard)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    return shard, ShardStore.open(path, identity=identity, read_only=True)
