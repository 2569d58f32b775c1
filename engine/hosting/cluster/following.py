"""What a running node follows of its cluster's records besides ownership, once per round:
the configuration's revisions (``ConfigFollower``: lane changes reach the running engine)
and the routes' sealed evidence keys (``KeyFollower``: a rotation reaches the running
shards, which sign with the new key from then on, and the node's home; a new sealing key
reaches the node from its settings, and it says which keys it holds).

Neither ever stalls the node's rounds: what cannot be applied is logged once, with why.
"""

from __future__ import annotations

from collections.abc import Callable

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.evidence_seal import SETTING, SealKey
from nereus.cluster.records import NodeKeys, SealedRouteKey
from nereus.coordination.errors import CoordinationError
from nereus.coordination.protocol import Session
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
    home's copy. A record is looked at again only when it changed. A record sealed under a
    sealing key this node does not hold (``cluster reseal-evidence-keys``) leaves the keys
    it opened in force: the node reads its ``[cluster]`` sealing keys again (at most every
    ``RELOAD_S``) and says once which key it lacks. Each round ends by saying which keys it
    holds (``NodeKeys``, when that changed)."""

    RELOAD_S = 2.0

    def __init__(self, store: ClusterStore, engine: Engine, seal_key: SealKey | None,
                 events: EventLog, *, node_id: str = "",
                 session: Callable[[], Session | None] = lambda: None) -> None:
        self._store, self._engine, self._seal_key, self._events = store, engine, seal_key, events
        self._node_id, self._session = node_id, session
        self._seen: dict[str, tuple[str, int, int]] = {}  # route -> (key id, generation, until)
        self._said: set[tuple[str, str]] = set()  # (route, key id) said to be lacking
        self._reloaded = float("-inf")
        self._reported: tuple[int, NodeKeys] | None = None  # (session id, report)
        self._report_failing = False  # node_keys_not_reported said, not yet reported since

    def follow(self) -> None:
        from nereus.adapters.cluster.sealed_keys import sealed_routes

        if self._seal_key is not None:  # else no sealed keys (a node with some did not start)
            records = {route: record for route, record in sealed_routes(self._store).items()
                       if route in self._engine.config.routes}
            if any(r.key_id not in self._seal_key.key_ids for r in records.values()):
                self._reload()
            for route, record in records.items():
                self._follow_route(route, record)
        self._report()

    def _follow_route(self, route: str, record: SealedRouteKey) -> None:
        assert self._seal_key is not None
        if record.key_id not in self._seal_key.key_ids:
            if (route, record.key_id) not in self._said:
                self._said.add((route, record.key_id))
                safe_event(self._events, "evidence_seal_key_lacking", level="warning",
                           route=route, sealed_under=record.key_id,
                           holds=list(self._seal_key.key_ids),
                           reason=f"the keys opened before stay in force; give this node "
                                  f"sealing key {record.key_id} in {SETTING} before it "
                                  "restarts (with only these it is refused)")
            return
        seen = (record.key_id, record.current.generation, record.previous_until_ms)
        if self._seen.get(route) != seen:
            self._seen[route] = seen
            self._apply(route, record.current.generation)

    def _reload(self) -> None:
        """This node's sealing keys read again from its ``[cluster]`` settings."""
        import time

        from nereus.adapters.cluster.evidence_seal import seal_key_of
        from nereus.adapters.cluster.home_config import load_home_config

        if time.monotonic() - self._reloaded < self.RELOAD_S:
            return
        self._reloaded = time.monotonic()
        try:
            config = load_home_config(self._engine.layout.config)
            found = seal_key_of(config.cluster, self._engine.home)
        except NereusError as exc:
            safe_event(self._events, "evidence_seal_key_not_read", level="error",
                       reason=exc.message)
            return
        if found is not None and self._seal_key is not None \
                and found.key_ids != self._seal_key.key_ids:
            self._seal_key = found
            self._seen.clear()  # every record is opened again with the keys held now
            safe_event(self._events, "evidence_seal_key_reloaded",
                       seal_key_ids=list(found.key_ids))

    def _report(self) -> None:
        from nereus.adapters.cluster.sealed_keys import report_node_keys

        session = self._session()
        if session is None or not self._node_id:
            return
        report = NodeKeys(
            node_id=self._node_id,
            seal_key_ids=[] if self._seal_key is None else list(self._seal_key.key_ids),
            generations={route: self._engine.evidence_ring(route).keys.generation
                         for route in sorted(self._engine.config.routes)})
        if self._reported == (session.session_id, report):
            return
        try:
            report_node_keys(self._store, session, report)
        except CoordinationError as exc:  # tried again next round, said once until it works
            if not self._report_failing:
                self._report_failing = True
                safe_event(self._events, "node_keys_not_reported", level="warning",
                           reason=str(exc))
            return
        self._report_failing = False
        self._reported = (session.session_id, report)

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
            elif ring.keys != keys:  # the same keys, numbered as the cluster numbers them
                ring.replace(keys)  # (a home's copy does not keep the generation)
            install_route_keys(self._store, self._engine.home, [route],
                               seal_key=self._seal_key)
        except NereusError as exc:
            safe_event(self._events, "evidence_key_not_applied", level="error", route=route,
                       generation=generation, reason=exc.message)
