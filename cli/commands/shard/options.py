"""What the ``nereus shard`` commands share: the SHARD argument, ``--db``, the largest
position, and opening a shard database read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nereus.cli.shard_offline import open_db

__all__ = ["MAX_POSITION", "DbOption", "ShardArg", "open_db"]

MAX_POSITION = (1 << 63) - 1  # a Shard Log position (Kafka offsets are signed 64-bit)

ShardArg = Annotated[str, typer.Argument(metavar="SHARD", help="ROUTE/PARTITION, e.g. default/0.")]
DbOption = Annotated[Path | None, typer.Option(
    "--db", help="A shard database directory (default: the home's live database).")]
