"""``nereus dashboard``: the live Textual dashboard over this home's engine.

Textual is imported only inside the command (``nereus --help`` must not pay ~160 ms for
it, and a test checks ``sys.modules``). The dashboard reads the admin socket's feed and
keeps retrying while no engine runs; its mutations run this same CLI in a subprocess
(``nereus lane close|open ... --reason ... --yes``), so they follow the CLI's rules.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from nereus.cli.context import Env


def dashboard(
    ctx: typer.Context,
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="Turn the mutation keys (c close lane, o open lane) off.")] = False,
    interval: Annotated[float, typer.Option(
        "--interval", min=0.1, max=1.0,
        help="Seconds between status documents from the engine (0.1 to 1).")] = 1.0,
) -> None:
    """The live dashboard: shards, lanes, open obligations, UNCERTAIN attempts.

    Enter drills into a shard, lane or message; / filters rows; c / o close / open the
    selected lane after asking for a reason; n shows the cluster (nodes, shard ownership,
    moves in progress, read from the coordinator of a node's home every second); q quits.
    Works while the engine is down (it says so and keeps retrying).
    """
    from nereus.errors import UsageError

    env: Env = ctx.obj
    if env.output.json_mode:
        raise UsageError("the dashboard is interactive: --json is not available for it",
                         hint="use `nereus --json shard list`, `lane list` or `attempt list`")
    config = env.config  # no home, no engine: fail now with the usual hint
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the dashboard needs a terminal (stdin and stdout are not a tty)",
                         hint="run it in a terminal, or use `nereus --json shard list` in scripts")

    from nereus.tui.admin_source import AdminSource
    from nereus.tui.app import make_app
    from nereus.tui.cluster_source import CoordinatorSource
    from nereus.tui.mutations import CliMutationRunner

    source = AdminSource(env.layout.run / "admin.sock", interval_s=interval)
    cluster = None if config.cluster is None else CoordinatorSource(
        config.cluster.coordinator, node_id=config.cluster.node_id)
    make_app(source, CliMutationRunner(env.home.resolve()), read_only=read_only,
             cluster=cluster).run()
