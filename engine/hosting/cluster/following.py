"""What a running node follows of its cluster's records besides ownership, once per round:
the configuration's revisions (``ConfigFollower``: lane changes reach the running engine)
and the routes' sealed evidence keys (``KeyFollower``: a rotation reaches the running
shards, which sign with the new key from then on, and the node's home).

Neither ever stalls the node's rounds: what cannot be applied is logged once, with why.
"""

from __future__ import annotations

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.evidence_seal import SealKey
from nereus.engine.hosting.cluster.node_settings import ConfigSource
from nereus.engine.process.home_engine import Engine
from nereus.engine.runtime.event_log import EventLog, safe_event
from nereus.errors import NereusError


class ConfigFollower:
    """A new revision of the cluster's configuration: its lane changes reach this node's
    engine now (``Engine.reconfigure``); what needs a restart is said."""

    def __init__(self, store: ClusterStore, engine: Engine, reload: ConfigSource | None,
                 events: EventLog) -> None:
        self._store, self._engine, self._reload, self._events = store, engine, reload, events
        self._version: int | None = None

    def follow(self) -> None:
        found = self._store.config()
        version = None if found is None else found[1].version_id
        if self._version is None or version == self._version:
            self._version = version
            return
        self._version = version
        if self._reload is None or found is None:
            return
        try:
            config = self._reload()
        except NereusError as exc:  # never stall the node's rounds on a bad revision
            safe_event(self._events, "cluster_config_not_applied", level="error",
                       revision=found[0].revision, reason=exc.message)
            return
        if config.routes != self._engine.config.routes:
            safe_event(self._events, "cluster_config_not_applied", level="error",
                       revision=found[0].revision,
                       reason="routes changed: restart the node to use them")
            return
        changes = self._engine.reconfigure(config)
        safe_event(self._events, "cluster_config_applied", revision=found[0].revision,
                   lanes_added=changes.added, lanes_reconfigured=changes.policy,
                   restart_needed_for=changes.needs_restart,
                   level="warning" if changes.needs_restart else "info")


class KeyFollower:
    """A route's sealed evidence keys changed (a rotation): opened with this node's sealing
    key, they replace the keys its shards use (``Engine.evidence_ring``) and then the
    home's copy. A record is looked at again only when it changed."""

    def __init__(self, store: ClusterStore, engine: Engine, seal_key: SealKey | None,
                 events: EventLog) -> None:
        self._store, self._engine, self._seal_key, self._events = store, engine, seal_key, events
        self._seen: dict[str, tuple[str, int, int]] = {}  # route -> (key id, generation, until)

    def follow(self) -> None:
        from nereus.adapters.cluster.sealed_keys import sealed_routes

        if self._seal_key is None:
            return  # a cluster without sealed keys (a node with sealed ones did not start)
        for route, record in sealed_routes(self._store).items():
            seen = (record.key_id, record.current.generation, record.previous_until_ms)
            if route not in self._engine.config.routes or self._seen.get(route) == seen:
                continue
            self._seen[route] = seen
            self._apply(route, record.current.generation)

    def _apply(self, route: str, generation: int) -> None:
        from nereus.adapters.cluster.route_keys import install_route_keys
        from nereus.adapters.cluster.sealed_keys import open_route_keys, read_sealed

        try:
            found = read_sealed(self._store, route)
            if found is None or self._seal_key is None:
                return
            keys = open_route_keys(found.record, self._seal_key)
            ring = self._engine.evidence_ring(route)
            if (ring.keys.current, ring.keys.previous) != (keys.current, keys.previous):
                ring.replace(keys)
                safe_event(self._events, "evidence_key_rotated", route=route,
                           generation=generation)
            install_route_keys(self._store, self._engine.home, [route],
                               seal_key=self._seal_key)
        except NereusError as exc:
            safe_event(self._events, "evidence_key_not_applied", level="error", route=route,
                       generation=generation, reason=exc.message)
