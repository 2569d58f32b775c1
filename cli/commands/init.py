"""``nereus init``: write ``<home>/nereus.toml`` and the home's folders."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.adapters.home.private_files import secure_home
from nereus.cli.commands import init_join
from nereus.cli.commands.cluster.coordinator_security import (
    CoordinatorSecurity,
    PasswordEnvOpt,
    PasswordFileOpt,
    TlsCaOpt,
    TlsCertOpt,
    TlsKeyOpt,
    UsernameOpt,
)
from nereus.cli.context import Env
from nereus.config_template import render_config

if TYPE_CHECKING:
    from nereus.config import Config, RouteSettings
    from nereus.records import RouteIdentity


def init(
    ctx: typer.Context,
    route: Annotated[str, typer.Option(help="Name of the ingress route.")] = "default",
    partitions: Annotated[int, typer.Option(min=1, max=4096,
                                            help="Partitions (= shards) of the route.")] = 1,
    log: Annotated[str, typer.Option(help="Shard Log backend: file, kafka or pulsar.")] = "file",
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite an existing nereus.toml. Routes that hold data in this "
        "home (shard logs or state) keep their name, partitions and log backend: a change "
        "to them is refused (exit 2).")] = False,
    from_home: Annotated[Path | None, typer.Option(
        "--from", metavar="HOME", help="Copy HOME's configuration instead (same routes, lanes, "
        "limits, and the same object store, so the engine restores from its Recovery Set); "
        "the other options are ignored.")] = None,
    copy_log: Annotated[bool, typer.Option(
        "--copy-log", help="With --from: copy the segments of HOME's file-log routes here "
        "(HOME's engine must be stopped).")] = False,
    attach: Annotated[bool, typer.Option(
        "--attach", help="Use a Command Topic that already holds a route's data: this home "
        "takes that route's identity (and partition count) instead of refusing.")] = False,
    join: init_join.JoinOpt = None,
    node_id: init_join.NodeIdOpt = None,
    capacity: init_join.CapacityOpt = 1,
    tls_ca_file: TlsCaOpt = None,
    tls_cert_file: TlsCertOpt = None,
    tls_key_file: TlsKeyOpt = None,
    username: UsernameOpt = None,
    password_file: PasswordFileOpt = None,
    password_env: PasswordEnvOpt = None,
) -> None:
    """Write nereus.toml: route ROUTE on the file log and a lane `local` (file outbox).

    With --force on a home that holds data, a route that has shard logs or state here
    must stay as it is (same name, partitions and log backend, and it keeps its route id);
    a configuration that changes or drops it exits 2 and nereus.toml is left as it was.
    Other settings are rewritten.
    """
    from nereus.errors import NereusError, UsageError

    env: Env = ctx.obj
    layout = env.layout
    security = CoordinatorSecurity(tls_ca_file, tls_cert_file, tls_key_file, username,
                                   password_file, password_env)
    if init_join.joined(ctx, join, node_id, capacity, force=force, security=security):
        return
    if layout.config.exists() and not force:
        raise NereusError(
            f"{layout.config} already exists",
            hint="pass --force to overwrite it (existing shard logs and state are kept)",
        )
    if from_home is not None:
        from nereus.cli.commands.init_from import init_from

        init_from(env, from_home, copy_log)
        return
    if copy_log:
        raise UsageError("--copy-log goes with --from HOME")
    _init_route(env, route=route, partitions=partitions, log=log, attach=attach)


def _init_route(env: Env, *, route: str, partitions: int, log: str, attach: bool) -> None:
    """Write a nereus.toml of ``route`` on ``log`` (its identity kept, or taken from a log
    that already holds it) after the checks that refuse to lose data."""
    from nereus.config import LOG_BACKENDS, parse_config
    from nereus.errors import UsageError
    from nereus.shard import validate_route_name

    layout = env.layout
    validate_route_name(route)
    if log not in LOG_BACKENDS:
        raise UsageError(f"--log {log!r}: expected one of {', '.join(LOG_BACKENDS)}")
    kept = _kept_routes(env)
    text = render_config(route=route, partitions=partitions, log=log,
                         route_id=kept.get(route) or uuid.uuid4().hex)
    config = parse_config(text, source=str(layout.config))
    refuse_route_changes(env, config.routes, check_partitions=not attach)
    layout.root.mkdir(parents=True, exist_ok=True)
    secure_home(layout.root)
    layout.outbox.mkdir(exist_ok=True)
    if log != "file":
        from nereus.adapters.backends.shardlog.broker_probe import probe_route

        probe_route(config.routes[route])  # a broker that is down fails here: 5 s, quietly
    found = _found_identity(env, config.routes[route], attach=attach)
    attached = found is not None
    if found is not None and found.partitions != partitions and not attach:
        raise UsageError(
            f"route {route}'s log holds {found.partitions} partitions; --partitions "
            f"{partitions} would move message ids to other shards",
            hint=f"init with --partitions {found.partitions}")
    if found is not None:  # this home takes the route identity its log already holds
        text = render_config(route=route, partitions=found.partitions, log=log,
                             route_id=found.route_id)
        config = parse_config(text, source=str(layout.config))
        partitions = found.partitions
        refuse_route_changes(env, config.routes)
    topic = _claim_log(env, config.routes[route]) if log != "file" else None
    tmp = layout.config.with_suffix(".toml.tmp")
    tmp.write_text(text)
    tmp.replace(layout.config)
    _emit_written(env, config, route, topic=topic, attached=attached)


def _emit_written(env: Env, config: Config, route: str, *, topic: str | None,
                  attached: bool) -> None:
    """What ``init`` wrote: the route, its shards and Command Topic, the lanes."""
    import msgspec

    from nereus.cli.setup_documents import InitLane, InitReport, InitRoute

    layout = env.layout
    settings = config.routes[route]
    partitions, log = settings.partitions, settings.log
    report = InitReport(
        home=str(layout.root), config=str(layout.config),
        routes=[InitRoute(route=route, log=log, partitions=partitions, command_topic=topic,
                          route_id=settings.route_id, attached=attached)],
        shards=[f"{route}/{p}" for p in range(partitions)],
        lanes=[InitLane(lane=lane.name, destination=lane.destination,
                        path=str(layout.root / lane.path) if lane.path else None)
               for lane in config.lanes.values()],
    )
    env.output.emit(
        msgspec.to_builtins(report),
        lambda out: out.print(
            f"wrote {layout.config}\n"
            f"  route {route}: {partitions} shard(s) on the {log} log"
            + (f" (Command Topic {topic})" if topic else "") + "\n"
            f"  lane local -> {layout.outbox / 'local.jsonl'}"
        ),
    )


def routes_with_data(root: Path) -> dict[str, list[Path]]:
    """Routes that hold data in the home at ``root``: each with its partition directories
    (``shardlog/ROUTE/N``, ``state/ROUTE/N``) that hold a non-empty file."""
    found: dict[str, list[Path]] = {}
    for area in ("shardlog", "state"):
        base = root / area
        routes = sorted(base.iterdir()) if base.is_dir() else []
        for route_dir in routes:
            if not route_dir.is_dir():
                continue
            for partition_dir in sorted(route_dir.iterdir()):
                if partition_dir.name.isdigit() and _holds_data(partition_dir):
                    found.setdefault(route_dir.name, []).append(partition_dir)
    return found


def _holds_data(directory: Path) -> bool:
    for path in directory.rglob("*"):
        if path.name != ".lock" and path.is_file() and path.stat().st_size > 0:
            return True
    return False


def _existing_config(env: Env) -> Config | None:
    """The home's current configuration, or None (absent or unreadable)."""
    from nereus.config import parse_config
    from nereus.errors import NereusError

    path = env.layout.config
    try:
        return parse_config(path.read_text(), source=str(path))
    except (OSError, NereusError):
        return None


def _kept_routes(env: Env) -> dict[str, str]:
    """Route ids to keep on re-init: those of configured routes that hold data here (their
    logs carry that identity in their first records)."""
    existing = _existing_config(env)
    if existing is None:
        return {}
    data = routes_with_data(env.layout.root)
    return {name: settings.id for name, settings in existing.routes.items()
            if name in data and settings.id}


def refuse_route_changes(env: Env, routes: dict[str, RouteSettings], *,
                          check_partitions: bool = True) -> None:
    """Refuse a configuration that drops a route holding data in this home, or changes
    its partitions or its log backend: its messages would be stranded, or their ids would
    hash to other shards. Other settings may change."""
    from nereus.errors import UsageError

    data = routes_with_data(env.layout.root)
    if not data:
        return
    existing = _existing_config(env)
    before = existing.routes if existing is not None else {}
    problems: list[str] = []
    hints: list[str] = []
    for name, dirs in sorted(data.items()):
        where = ", ".join(str(d.relative_to(env.layout.root)) for d in dirs[:3]) + (
            " ..." if len(dirs) > 3 else "")
        old = before.get(name)
        new = routes.get(name)
        if new is None:
            was = f" ({old.partitions} partition(s) on the {old.log} log)" if old else ""
            problems.append(f"route {name}{was} holds data ({where}) and the new "
                            "configuration has no such route")
            hints.append(f"init with --route {name}" + (
                f" --partitions {old.partitions} --log {old.log}" if old else ""))
            continue
        if old is not None and old.log != new.log:
            problems.append(f"route {name} holds data ({where}): its log would change from "
                            f"{old.log} to {new.log}")
            hints.append(f"keep --log {old.log} for route {name}")
        partitions = old.partitions if old is not None else 1 + max(int(d.name) for d in dirs)
        changed = (partitions != new.partitions if old is not None
                   else partitions > new.partitions)
        if check_partitions and changed:
            problems.append(f"route {name} holds data ({where}): its partitions would change "
                            f"from {partitions} to {new.partitions}, moving message ids to "
                            "other shards")
            hints.append(f"keep --partitions {partitions} for route {name}")
    if problems:
        raise UsageError(
            f"{env.layout.config} was left as it was: " + "; ".join(problems),
            hint="; ".join(hints) + ". init --force may rewrite other settings, not the "
            "routes that hold data; a new layout needs a new route or a new home")


def _found_identity(env: Env, settings: RouteSettings, *,
                    attach: bool) -> RouteIdentity | None:
    """The route identity the route's log already holds, if this home should take it.

    A file log lives in this home (a re-init with --force keeps its identity). A broker's
    Command Topic is shared: one that holds another route's data is refused unless
    ``--attach`` says to share it on purpose."""
    from nereus.adapters.backends.shardlog.factory import command_topic, open_shard_log
    from nereus.adapters.backends.shardlog.identity import describe, first_identity
    from nereus.errors import NereusError, UsageError
    from nereus.shard import ShardId

    if settings.log == "file" and not env.layout.shard_log(ShardId(settings.name, 0)).is_dir():
        return None
    log = open_shard_log(settings, ShardId(settings.name, 0), env.layout.root, create=True)
    try:
        found, problem = first_identity(log)
    finally:
        log.close()
    where = (f"Command Topic {command_topic(settings)}" if settings.log != "file"
             else f"the file log of route {settings.name}")
    if found is None and problem is None:
        if attach:
            raise UsageError(f"--attach: {where} is empty; there is no route to attach to")
        return None
    if found is None:
        raise NereusError(f"{where} is not a Nereus route's log: {problem}",
                          hint="give this route its own topic ([routes.NAME] topic)")
    if found.route != settings.name:
        raise NereusError(f"{where} holds {describe(found)}, not route {settings.name}",
                          hint=f"init with --route {found.route}, or use another topic")
    if settings.log != "file" and not attach:
        raise NereusError(
            f"{where} already holds {describe(found)}: another home's route",
            hint="sharing it would apply that home's commands here: give this route its own "
            "topic, or pass --attach to take that route's identity on purpose")
    return found


def _claim_log(env: Env, settings: RouteSettings) -> str:
    """Create the broker Command Topic now (a broker problem shows at init, not at first
    use) and write the route identity as the first record of every empty partition."""
    from nereus.adapters.backends.shardlog.factory import command_topic, open_shard_log
    from nereus.adapters.backends.shardlog.identity import ensure_route_identity
    from nereus.shard import ShardId

    topic = command_topic(settings)
    for partition in range(settings.partitions):
        log = open_shard_log(settings, ShardId(settings.name, partition), env.layout.root,
                             create=True)
        try:
            ensure_route_identity(log, settings.identity(partition),
                                  where=f"Command Topic {topic} partition {partition}")
        finally:
            log.close()
    return topic
