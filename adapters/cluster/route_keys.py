"""The routes' evidence keys in a cluster: one per route, kept in the coordinator
(``secrets/<route>``, ``nereus.cluster.records.RouteSecret``) and copied into each node's
home (``<home>/secrets/<route>.evidence-key``, where the engine reads it).

Every node that publishes or resolves for a route signs and checks destination evidence
with that route's key, so the key is made once, by whoever comes first (a create-only
write: a second writer reads the first's), and never changes. The coordinator's records are
readable by whoever may read the cluster's configuration: protect the coordinator (etcd's
auth, the SQLite file's mode) as the homes' ``secrets/`` directories are.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from pathlib import Path

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.home.route_secrets import install_route_key, key_path, route_key
from nereus.cluster.records import RouteSecret


def share_route_keys(store: ClusterStore, routes: Iterable[str], *, now_ms: int, made_by: str,
                     keys_from: Path | None = None) -> list[str]:
    """Make sure the coordinator holds a key for each of ``routes``; the routes whose key
    was made now. A new key is ``keys_from``'s (a home whose route joins the cluster) when
    that home has one, else fresh."""
    held = store.route_secrets()
    made: list[str] = []
    for route in routes:
        if route in held:
            continue
        if keys_from is not None and key_path(keys_from, route).exists():
            key = route_key(keys_from, route, create=False).hex()
        else:
            key = secrets.token_hex(32)
        kept = store.add_route_secret(RouteSecret(route=route, evidence_key=key,
                                                  made_ms=now_ms, made_by=made_by))
        if kept.evidence_key == key:
            made.append(route)
    return made


def install_route_keys(store: ClusterStore, home: Path, routes: Iterable[str]) -> list[str]:
    """Write the cluster's key of each of ``routes`` into ``home``; the routes written now
    (a home that already holds the same key is left as it is)."""
    held = store.route_secrets()
    return [route for route in routes
            if install_route_key(home, route, bytes.fromhex(held[route].evidence_key))]
