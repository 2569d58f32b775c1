"""``nereus shard``: offline tools over a shard's log and database.

None of these need a running engine. ``--db`` points at any shard database (a replay
output, a restored checkpoint); without it the home's live database is used, opened
read-only so it is safe beside a running engine.

The group is put together here, in the order its help lists the commands: reading a
shard as it is (``inspection.py``: inspect, list, log, dump) and its log as history
(``replay.py``: replay, digest, prune); ``shard pause|resume`` are operator mutations
(``nereus.cli.commands.mutate``, added in ``nereus.cli.main``).
"""

from __future__ import annotations

import typer

from nereus.cli.commands.shard import inspection, replay

app = typer.Typer(help="Inspect, replay and digest shards offline.", no_args_is_help=True)
app.command("replay")(replay.replay)
app.command("digest")(replay.digest)
app.command("inspect")(inspection.inspect)
app.command("list")(inspection.list_shards)
app.command("log")(inspection.log_command)
app.command("dump")(inspection.dump)
app.command("prune")(replay.prune)
