"""``nereus init``: write ``<home>/nereus.toml`` and the home's folders."""

from __future__ import annotations

from typing import Annotated

import typer

from nereus.cli.context import Env


def init(
    ctx: typer.Context,
    route: Annotated[str, typer.Option(help="Name of the ingress route.")] = "default",
    partitions: Annotated[int, typer.Option(min=1, max=4096,
                                            help="Partitions (= shards) of the route.")] = 1,
    log: Annotated[str, typer.Option(help="Shard Log backend: file, kafka or pulsar.")] = "file",
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite an existing nereus.toml.")] = False,
) -> None:
    """Write nereus.toml: route ROUTE on the file log and a lane `local` (file outbox)."""
    from nereus.config import LOG_BACKENDS, parse_config, render_config
    from nereus.errors import NereusError, UsageError
    from nereus.shard import validate_route_name

    env: Env = ctx.obj
    validate_route_name(route)
    if log not in LOG_BACKENDS:
        raise UsageError(f"--log {log!r}: expected one of {', '.join(LOG_BACKENDS)}")
    layout = env.layout
    if layout.config.exists() and not force:
        raise NereusError(
            f"{layout.config} already exists",
            hint="pass --force to overwrite it (existing shard logs and state are kept)",
        )
    text = render_config(route=route, partitions=partitions, log=log)
    config = parse_config(text, source=str(layout.config))
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.outbox.mkdir(exist_ok=True)
    if log != "file":
        # create the Command Topic now, so a broker problem shows at init, not at first use
        from nereus.engine.shardlog.factory import command_topic, open_shard_log
        from nereus.shard import ShardId

        settings = config.routes[route]
        open_shard_log(settings, ShardId(route, 0), layout.root, create=True).close()
        topic = command_topic(settings)
    else:
        topic = None
    tmp = layout.config.with_suffix(".toml.tmp")
    tmp.write_text(text)
    tmp.replace(layout.config)
    shards = [f"{route}/{p}" for p in range(partitions)]
    env.output.emit(
        {
            "home": str(layout.root),
            "config": str(layout.config),
            "routes": [{"route": route, "log": log, "partitions": partitions,
                        "command_topic": topic}],
            "shards": shards,
            "lanes": [
                {"lane": lane.name, "destination": lane.destination,
                 "path": str(layout.root / lane.path) if lane.path else None}
                for lane in config.lanes.values()
            ],
        },
        lambda out: out.print(
            f"wrote {layout.config}\n"
            f"  route {route}: {partitions} shard(s) on the {log} log"
            + (f" (Command Topic {topic})" if topic else "") + "\n"
            f"  lane local -> {layout.outbox / 'local.jsonl'}"
        ),
    )
