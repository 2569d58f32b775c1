"""``nereus init --from HOME``: a home with HOME's configuration (and evidence keys),
pointing at HOME's object store; with ``--copy-log`` HOME's file-log segments too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from nereus.adapters.home.private_files import secure_home
from nereus.cli.commands.init import refuse_route_changes
from nereus.cli.context import Env

if TYPE_CHECKING:
    from nereus.cli.setup_documents import CopiedLog
    from nereus.config import RouteSettings
    from nereus.layout import HomeLayout


def pin_object_store(text: str, objects_path: Path) -> str:
    """``text`` (a nereus.toml) with ``[objects] path`` set to the absolute
    ``objects_path``: a copied configuration must reach the same file object store,
    whatever home it is read from."""
    line = f'path = "{objects_path}"  # the object store of the home this was copied from'
    header = re.compile(r"^\s*\[\s*objects\s*\]\s*(#.*)?$")
    lines = text.splitlines()
    for index, current in enumerate(lines):
        if header.match(current):
            end = next((i for i in range(index + 1, len(lines))
                        if lines[i].lstrip().startswith("[")), len(lines))
            for inner in range(index + 1, end):
                if re.match(r"^\s*path\s*=", lines[inner]):
                    lines[inner] = line
                    break
            else:
                lines.insert(index + 1, line)
            return "\n".join(lines) + "\n"
    return text.rstrip("\n") + f'\n\n[objects]\nstore = "file"\n{line}\n'


def _copy_route_keys(source: Path, target: Path, routes: dict[str, RouteSettings]) -> None:
    """The routes' evidence keys go with their configuration: a home that publishes or
    resolves for a route must sign and check evidence with the same key."""
    import os
    import shutil

    from nereus.adapters.home.route_secrets import key_path

    for name in routes:
        origin, copy = key_path(source, name), key_path(target, name)
        if origin.exists() and not copy.exists():
            copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(origin, copy)
            os.chmod(copy, 0o600)


def _copy_file_logs(source: HomeLayout, layout: HomeLayout, file_routes: list[RouteSettings],
                    copy_log: bool) -> list[CopiedLog]:
    """The segments of the file-log routes copied from ``source`` (refused without
    ``--copy-log``, while its engine runs, or over a Shard Log this home already holds)."""
    import shutil

    from nereus.cli.setup_documents import CopiedLog
    from nereus.engine.hosting.daemon import is_locked
    from nereus.errors import NereusError, UsageError
    from nereus.shard import ShardId

    if file_routes and not copy_log:
        names = ", ".join(r.name for r in file_routes)
        raise UsageError(
            f"route(s) {names} of {source.root} use the file log, which lives in that home",
            hint="pass --copy-log to copy its segments here (stop that home's engine first)")
    if file_routes and is_locked(source.root):
        raise NereusError(f"the engine of {source.root} is running: its file log is still "
                          "being written", hint=f"stop it first: nereus --home {source.root} "
                          "engine stop")
    logs: list[CopiedLog] = []
    for route in file_routes:
        for partition in range(route.partitions):
            shard = ShardId(route.name, partition)
            origin, target = source.shard_log(shard), layout.shard_log(shard)
            if target.exists() and any(target.iterdir()):
                raise NereusError(f"{target} already holds a Shard Log; not overwriting it")
            if origin.is_dir():
                shutil.copytree(origin, target, dirs_exist_ok=True)
            logs.append(CopiedLog(shard=str(shard), source=str(origin), target=str(target),
                                  segments=len(list(target.glob("*.seg"))) if target.is_dir()
                                  else 0))
    return logs


def init_from(env: Env, source_home: Path, copy_log: bool) -> None:
    """``init --from HOME``: HOME's configuration, pointing at HOME's object store; with
    ``--copy-log`` the segments of HOME's file-log routes too (broker routes already point
    at the same Command Topics)."""
    import msgspec

    from nereus.cli.setup_documents import CopiedRoute, InitFromReport
    from nereus.config import parse_config
    from nereus.errors import NotFound, UsageError
    from nereus.layout import HomeLayout

    layout = env.layout
    source = HomeLayout(source_home.expanduser().absolute())
    if source.root.resolve() == layout.root.absolute().resolve():
        raise UsageError("--from names this home itself")
    if not source.config.exists():
        raise NotFound(f"no configuration at {source.config}")
    text = source.config.read_text()
    config = parse_config(text, source=str(source.config))
    objects_path = None
    if config.objects.store == "file":
        relative = Path(config.objects.path or "objects")
        objects_path = relative if relative.is_absolute() else source.root / relative
        text = pin_object_store(text, objects_path)
    copied = parse_config(text, source=str(layout.config))
    refuse_route_changes(env, copied.routes)
    logs = _copy_file_logs(source, layout,
                           [r for r in copied.routes.values() if r.log == "file"], copy_log)
    layout.root.mkdir(parents=True, exist_ok=True)
    secure_home(layout.root)
    layout.outbox.mkdir(exist_ok=True)
    _copy_route_keys(source.root, layout.root, copied.routes)
    tmp = layout.config.with_suffix(".toml.tmp")
    tmp.write_text(text)
    tmp.replace(layout.config)
    data = msgspec.to_builtins(InitFromReport(
        home=str(layout.root), config=str(layout.config), source=str(source.root),
        object_store=str(objects_path) if objects_path else f"s3://{config.objects.bucket}",
        routes=[CopiedRoute(route=r.name, log=r.log, partitions=r.partitions)
                for r in copied.routes.values()],
        shards=[f"{r.name}/{p}" for r in copied.routes.values() for p in range(r.partitions)],
        copied_logs=logs,
    ))
    env.output.emit(data, lambda out: out.print(
        f"wrote {layout.config} from {source.config}\n"
        f"  object store: {data['object_store']}\n"
        + "".join(f"  copied the Shard Log of {log['shard']} ({log['segments']} segment(s))\n"
                  for log in data["copied_logs"])
        + "  `nereus engine start` restores each shard from its newest usable checkpoint"))
