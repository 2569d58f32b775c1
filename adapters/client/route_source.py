"""Where a client learns its route: a home's ``nereus.toml`` or a cluster's configuration
record in its coordinator; and, from the route itself, its identity.

Partitions and route id come from the ROUTE_IDENTITY record at the head of each partition
(read before the first append to it, as ``docs/wire.md`` §1 asks; an empty partition gets
it written first, a partition holding another route's identity is refused); ORDERED lanes,
limits and connection settings from the same configuration the engine runs with. Nothing
is built by hand.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.identity import ensure_route_identity, first_identity
from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.adapters.cluster.coordinator_url import ClusterHandle
from nereus.client.prepare import RouteRef
from nereus.config import Config, RouteSettings
from nereus.errors import NotFound
from nereus.layout import HomeLayout
from nereus.machine.limits import Limits
from nereus.records import RouteIdentity
from nereus.shard import ShardId


@dataclass
class RouteSource:
    """One route as a client sees it; opens each shard's log once (thread-safe)."""

    config: Config
    settings: RouteSettings
    home: Path | None  # the home (file log, admin socket, local object store)
    cluster: ClusterHandle | None
    _logs: dict[ShardId, ShardLog] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ref: RouteRef | None = None

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def limits(self) -> Limits:
        return self.config.limits

    @property
    def lanes(self) -> frozenset[str]:
        return frozenset(self.config.lanes)

    @property
    def source(self) -> str:
        return str(self.config.source)

    @property
    def layout(self) -> HomeLayout | None:
        return None if self.home is None else HomeLayout(self.home)

    def ref(self) -> RouteRef:
        """The route as ``prepare`` needs it, partitions and id from partition 0's identity
        record (checked against the configuration's) and ORDERED lanes from the configuration."""
        if self._ref is None:
            log = self.log(ShardId(self.name, 0))
            identity, _ = first_identity(log)
            expected = self.settings.identity(0)
            found = identity or expected  # a pruned head: the check in log() held
            self._ref = RouteRef(found.route, found.partitions, self.config.ordered_lanes,
                                 route_id=found.route_id)
        return self._ref

    def log(self, shard: ShardId) -> ShardLog:
        """The shard's Shard Log, its route identity checked (written to an empty log) on
        first use, with the connection settings the engine uses."""
        with self._lock:
            log = self._logs.get(shard)
            if log is None:
                log = self._open(shard)
                self._logs[shard] = log
            return log

    def _open(self, shard: ShardId) -> ShardLog:
        log = open_shard_log(self.settings, shard, self.home or Path("."))
        try:
            layout = self.layout
            check_command_log(log, shard, self.settings.identity(shard.partition),
                              state=None if layout is None else layout.shard_state(shard),
                              source=self.source)
        except BaseException:
            log.close()
            raise
        return log

    def close(self) -> None:
        with self._lock:
            for log in self._logs.values():
                log.close()
            self._logs.clear()
        if self.cluster is not None:
            self.cluster.close()


def check_command_log(log: ShardLog, shard: ShardId, identity: RouteIdentity, *,
                      state: Path | None, source: str) -> None:
    """What every client checks before its first append to a shard's log (the CLI's
    commands too): the log does not end at or before the applied position of the shard's
    database in ``state``, if there is one (``LogDiverged``; a file log keeps refusing
    appends while it would), and it begins with ``identity`` (written to an empty log;
    another route's is refused)."""
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.adapters.offline.continuity_checks import (
        applied_position,
        check_log_end,
        guard_file_log,
    )

    applied = None if state is None else applied_position(state)
    if state is not None and applied is not None:  # no database: nothing to compare
        check_log_end(shard, applied, log.end_position(), state)
        if isinstance(log, FileShardLog):
            guard_file_log(shard, log, applied, state)
    ensure_route_identity(log, identity,
                          where=getattr(log, "description", f"the Shard Log of {shard}"),
                          source=source)


def from_home(path: Path | str, route: str) -> RouteSource:
    """The route ``route`` of the home at ``path`` (its ``nereus.toml``; a cluster node's
    home reads the cluster's configuration from its coordinator, as its engine does)."""
    from nereus.adapters.cluster.home_config import load_home_config

    home = Path(path).expanduser()
    config_path = HomeLayout(home).config
    if not config_path.exists():
        raise NotFound(f"no configuration at {config_path}",
                       hint=f"run `nereus --home {home} init` first")
    config = load_home_config(config_path)
    cluster = None
    if config.cluster is not None:
        from nereus.adapters.cluster.coordinator_url import open_cluster

        cluster = open_cluster(config.cluster.coordinator)
    return RouteSource(config, config.route(config.route_name(route)), home, cluster)


def from_cluster(url: str, route: str) -> RouteSource:
    """The route ``route`` of the cluster at coordinator ``url`` (its configuration record:
    routes on Kafka or Pulsar, lanes, limits, the shared object store)."""
    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.coordinator_url import open_cluster
    from nereus.adapters.cluster.home_config import check_cluster_text

    handle = open_cluster(url)
    try:
        shared = ClusterStore(handle).require_config()
        config = check_cluster_text(shared.toml, source=f"the cluster's configuration "
                                    f"r{shared.revision} ({url})")
        settings = config.route(config.route_name(route))
    except BaseException:
        handle.close()
        raise
    return RouteSource(config, settings, None, handle)
