"""What every command needs: the home, its configuration, the output, the logs.

The home is found from ``--home``, then ``NEREUS_HOME``, then ``./.nereus``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from nereus.cli.output import Output, output_format
from nereus.errors import NotFound
from nereus.layout import HomeLayout
from nereus.shard import ShardId

if TYPE_CHECKING:
    from nereus.adapters.admin.admin_client import AdminClient
    from nereus.adapters.backends.objectstore.protocol import ObjectStore
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.adapters.backends.shardlog.protocol import ShardLog
    from nereus.client import CommandSink, RouteRef
    from nereus.config import Config


def resolve_home(option: str | None) -> Path:
    if option:
        return Path(option).expanduser()
    env = os.environ.get("NEREUS_HOME")
    if env:
        return Path(env).expanduser()
    return Path.cwd() / ".nereus"


class Env(msgspec.Struct):
    """The root options as a command sees them, with what it opened (a Struct rather than a
    dataclass: it is defined on every command line, the lean ones too)."""

    home: Path
    output: Output
    home_explicit: bool = False
    _config: Config | None = None
    _logs: dict[ShardId, FileShardLog] = msgspec.field(default_factory=dict)
    _other_logs: dict[ShardId, ShardLog] = msgspec.field(default_factory=dict)
    _checked: set[ShardId] = msgspec.field(default_factory=set)
    _orphan_said: bool = False  # the engine without its socket was named once

    @classmethod
    def from_options(cls, home: str | None, *, json_output: bool, output: str | None) -> Env:
        """The environment of the root options as parsed (``--home``, given or from a
        non-empty ``NEREUS_HOME``; ``--json``; ``--output``): what the Typer root callback
        and the console script's lean paths both build. An unknown format is a UsageError."""
        chosen = output_format(output, json_flag=json_output, environ=os.environ)
        return cls(home=resolve_home(home),
                   output=Output(json_mode=chosen != "table", document_format=chosen),
                   home_explicit=bool(home))

    @property
    def layout(self) -> HomeLayout:
        return HomeLayout(self.home)

    @property
    def config(self) -> Config:
        if self._config is None:
            from nereus.adapters.cluster.home_config import load_home_config

            path = self.layout.config
            if not path.exists():
                raise NotFound(
                    f"no configuration at {path}",
                    hint=f"run `nereus --home {self.home} init` first, or set NEREUS_HOME",
                )
            self._config = load_home_config(path)
        return self._config

    def shard(self, text: str) -> ShardId:
        """Parse a shard name and check it exists in the configuration."""
        shard = ShardId.parse(text)
        route = self.config.route(shard.route)
        if shard.partition >= route.partitions:
            raise NotFound(
                f"shard {shard} does not exist: route {route.name} has {route.partitions} "
                f"partition(s), 0..{route.partitions - 1}"
            )
        return shard

    def route_ref(self, name: str) -> RouteRef:
        """What a client needs of route ``name``: partitions and the ORDERED lanes."""
        from nereus.client import RouteRef

        route = self.config.route(name)
        return RouteRef(route.name, route.partitions, self.config.ordered_lanes)

    def message_shard(self, route: str, delay_message_id: str) -> ShardId:
        """The shard that holds an existing message.

        By its id's hash, unless an ORDERED lane placed it by its key: then the engine is
        asked behind a query barrier (so a message queued a moment ago, not applied yet, is
        found on its key's shard: a cancel racing its schedule goes where the message is),
        or, with no engine, each shard's database is read (read-only); a message queued
        but not applied is not found that way, and its id's shard is the answer then.
        """
        ref = self.route_ref(route)
        home_shard = ref.shard_for(delay_message_id)
        if not ref.ordered_lanes or ref.partitions == 1:
            return home_shard
        if self.engine_running():
            from nereus.errors import EngineUnreachable

            try:
                found = self.admin().message(delay_message_id, route=route, barrier=True)
                return ShardId.parse(str(found["shard"]))
            except NotFound:
                return home_shard
            except EngineUnreachable:
                pass
        from nereus.errors import StoreError
        from nereus.state import keys
        from nereus.state.store import ShardStore

        for partition in range(ref.partitions):
            shard = ShardId(ref.name, partition)
            path = self.layout.shard_state(shard)
            if not (path / "CURRENT").exists():
                continue
            try:
                with ShardStore.open(path, read_only=True) as store:
                    if store.get(keys.msg_key(delay_message_id)) is not None:
                        return shard
            except StoreError:
                continue
        return home_shard

    def shard_log(self, shard: ShardId, *, directory: Path | None = None,
                  create: bool = True) -> ShardLog:
        """The shard's Shard Log on its route's backend (file, Kafka or Pulsar)."""
        if directory is not None or self.config.route(shard.route).log == "file":
            return self.file_log(shard, directory=directory, create=create)
        if shard not in self._other_logs:
            from nereus.adapters.backends.shardlog.broker_probe import probe_route
            from nereus.adapters.backends.shardlog.factory import open_shard_log

            probe_route(self.config.route(shard.route))  # 5 s at most, quietly
            self._other_logs[shard] = open_shard_log(self.config.route(shard.route), shard,
                                                     self.home, create=create)
        return self._other_logs[shard]

    def command_log(self, shard: ShardId) -> ShardLog:
        """The shard's Shard Log to append to: its route identity is checked first (once
        per shard and process) and written if the log is empty, so a client never appends
        to another route's log or under another partition count. A log that ends at or
        before the shard's applied position (records the state applied are gone) is refused
        (``LogDiverged``): an append would take a position the state already used."""
        log = self.shard_log(shard)
        if shard not in self._checked:
            from nereus.adapters.client.route_source import check_command_log

            check_command_log(log, shard, self.config.route(shard.route).identity(
                shard.partition), state=self.layout.shard_state(shard),
                source=str(self.config.source))
            self._checked.add(shard)
        return log

    def file_log(self, shard: ShardId, *, directory: Path | None = None,
                 create: bool = True) -> FileShardLog:
        """The shard's file Shard Log (the embedded default); file-only operations use it."""
        from nereus.adapters.backends.shardlog.file_log import FileShardLog
        from nereus.errors import UsageError

        if directory is None:
            backend = self.config.route(shard.route).log
            if backend != "file":
                raise UsageError(
                    f"route {shard.route} uses the {backend} log; this operation needs the "
                    "file log (segments on disk)"
                )
        key = shard
        if directory is not None or key not in self._logs:
            log = FileShardLog(directory or self.layout.shard_log(shard), create=create)
            if directory is not None:
                return log
            self._logs[key] = log
        return self._logs[key]

    def admin(self) -> AdminClient:
        """The engine's admin socket client (raises EngineUnreachable when not running)."""
        from nereus.adapters.admin.admin_client import AdminClient

        return AdminClient(self.layout.run / "admin.sock")

    def object_store(self) -> ObjectStore:
        """The home's object store (``[objects]``): checkpoints, the catalog, payloads."""
        from nereus.adapters.backends.objectstore.factory import open_object_store

        objects = open_object_store(self.config.objects, self.home)
        if self.config.cluster is None:
            return objects
        from nereus.adapters.cluster.catalog_store import CoordinatedCatalog
        from nereus.adapters.cluster.coordinator_url import open_cluster

        return CoordinatedCatalog(objects, open_cluster(self.config.cluster.coordinator))

    def command_sink(self, *, wait: bool) -> CommandSink:
        """Where commands go: the running engine, or (none running) straight to the Shard
        Logs. ``wait`` needs the engine: without one it is refused (exit 4)."""
        from nereus.errors import EngineUnreachable

        if wait:
            from nereus.adapters.home.home_lock import orphaned_engine, socket_lost

            pid = orphaned_engine(self.home)
            if pid is not None:
                raise socket_lost(self.home, pid)
        if self.engine_running():
            from nereus.adapters.admin.admin_client import EngineSink

            return EngineSink(self.admin())
        if wait:
            raise EngineUnreachable(
                f"--wait needs the engine, and none runs on {self.home}",
                hint="start it with `nereus engine start`, or drop --wait for the QUEUED receipt")
        from nereus.client import LogSink

        return LogSink(self.command_log)

    def engine_running(self) -> bool:
        """Whether the engine answers here (its socket and the home's lock). An engine
        that holds the lock without its socket (deleted under it) is not reachable: the
        command answers from the files, and says once which engine runs and how to get
        its socket back."""
        from nereus.engine.hosting.daemon import is_locked

        if (self.layout.run / "admin.sock").exists():
            return is_locked(self.home)
        if not self._orphan_said:
            from nereus.adapters.home.home_lock import orphaned_engine, socket_lost

            pid = orphaned_engine(self.home)
            if pid is not None:
                self._orphan_said = True
                lost = socket_lost(self.home, pid)
                self.output.warn(f"{lost.message}; answering from the home's files instead "
                                 f"({lost.hint})")
        return False

    def close(self) -> None:
        for log in self._logs.values():
            for repair in log.repairs:
                self.output.warn(
                    f"cut a torn tail of {repair.dropped_bytes} bytes ({repair.problem}) at byte "
                    f"{repair.offset} of {repair.path}: a crashed append that was never receipted"
                )
            log.close()
        for other in self._other_logs.values():
            other.close()
