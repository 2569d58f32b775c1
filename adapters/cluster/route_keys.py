"""The routes' evidence keys in a cluster: one per route, kept in the coordinator and
copied into each node's home (``<home>/secrets/<route>.evidence-key``, where the engine
reads it).

Every node that publishes or resolves for a route signs and checks destination evidence
with that route's key, so the key is made once, by whoever comes first (a create-only
write: a second writer reads the first's). Below feature level 2 the coordinator keeps it
in plain text (``secrets/<route>``, ``RouteSecret``: what a 0.1.0 node reads). From level 2
it keeps it only sealed under the nodes' sealing key (``sealed-keys/<route>``,
``sealed_keys.py``): a node holding that key seals a route's key when it starts (a plain
one it finds is sealed and deleted), and opens it into its home. A command without the
sealing key (``cluster init``, ``init --join``, a node not given it) still gives a route
that has no key at all a plain one, so that every node signs alike; the first node with
the sealing key seals it (``docs/security.md``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from pathlib import Path

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.adapters.cluster.evidence_seal import SealKey, require_seal_key
from nereus.adapters.cluster.feature_levels import read_level
from nereus.adapters.cluster.sealed_keys import (
    forget_plain_key,
    open_route_keys,
    read_sealed,
    seal_route,
)
from nereus.adapters.home.route_secrets import (
    install_route_key,
    install_route_keys_ring,
    key_path,
    route_key,
)
from nereus.cluster.records import RouteSecret
from nereus.features import SEALED_KEYS_LEVEL


def share_route_keys(store: ClusterStore, routes: Iterable[str], *, now_ms: int, made_by: str,
                     keys_from: Path | None = None, seal_key: SealKey | None = None
                     ) -> list[str]:
    """Make sure the coordinator holds a key for each of ``routes`` (module docstring);
    the routes whose key was made now. A new key is ``keys_from``'s (a home whose route
    joins the cluster) when that home has one, else fresh."""
    held = store.route_secrets()
    sealing = read_level(store).level.level >= SEALED_KEYS_LEVEL
    made: list[str] = []
    for route in routes:
        if sealing and read_sealed(store, route) is not None:
            if route in held and seal_key is not None:  # a plain one made meanwhile
                forget_plain_key(store, route)
            continue
        if sealing and seal_key is not None:
            key = bytes.fromhex(held[route].evidence_key) if route in held else \
                _new_key(keys_from, route)
            if seal_route(store, route, key, seal_key, now_ms=now_ms, made_by=made_by) \
                    and route not in held:
                made.append(route)
            continue
        if route in held:
            continue  # without the sealing key a route with no key at all gets a plain one
        key = _new_key(keys_from, route)
        kept = store.add_route_secret(RouteSecret(route=route, evidence_key=key.hex(),
                                                  made_ms=now_ms, made_by=made_by))
        if kept.evidence_key == key.hex():
            made.append(route)
    return made


def _new_key(keys_from: Path | None, route: str) -> bytes:
    if keys_from is not None and key_path(keys_from, route).exists():
        return route_key(keys_from, route, create=False)
    return secrets.token_bytes(32)


def install_route_keys(store: ClusterStore, home: Path, routes: Iterable[str], *,
                       seal_key: SealKey | None = None, sealed_required: bool = True
                       ) -> list[str]:
    """Write the cluster's keys of each of ``routes`` into ``home``; the routes written now
    (a home that already holds the same keys is left as it is). A sealed route needs
    ``seal_key`` (``ConfigError`` naming the setting), unless not ``sealed_required``
    (then it is left for the node's start)."""
    held = store.route_secrets()
    written: list[str] = []
    for route in routes:
        sealed = read_sealed(store, route)
        if sealed is not None:
            if seal_key is None and not sealed_required:
                continue
            keys = open_route_keys(sealed.record, require_seal_key(seal_key, route))
            if install_route_keys_ring(home, route, keys):
                written.append(route)
        elif route in held and install_route_key(home, route,
                                                 bytes.fromhex(held[route].evidence_key)):
            written.append(route)
    return written
