"""Where each cluster record lives in the coordinator (relative to the cluster's root).

A shard's key segment is ``<route>:<partition>`` (``:`` is never part of a route name), so
every range the cluster reads is one prefix ending in ``/`` with no further ``/``: the
ranges whose order etcd, SQLite and Oxia agree on (``nereus.coordination.records``).
"""

from __future__ import annotations

from typing import Final

from nereus.shard import ShardId

CONFIG: Final = "config"
AUDIT: Final = "config-audit/"
NODES: Final = "nodes/"
LEADER: Final = "leader"
PLACEMENT: Final = "placement/"
OWNERS: Final = "owners/"
DRAINS: Final = "drains/"
SECRETS: Final = "secrets/"
SEALED_KEYS: Final = "sealed-keys/"  # a route's sealed evidence keys (``SealedRouteKey``)
NODE_KEYS: Final = "node-keys/"  # which keys each live node holds (``NodeKeys``, ephemeral)
WARM: Final = "warm/"
EPOCHS: Final = "epochs/"
MOVED: Final = "moved"  # the cluster moved to another coordinator (``Moved``)
FEATURE_LEVEL: Final = "feature-level"  # the cluster's feature level (``FeatureLevel``)
MIGRATED: Final = "migrated"  # the cluster was copied here from another one (``Migrated``)


def shard_segment(shard: ShardId) -> str:
    return f"{shard.route}:{shard.partition}"


def parse_segment(segment: str) -> ShardId:
    route, _, partition = segment.rpartition(":")
    return ShardId(route, int(partition))


def node_key(node_id: str) -> str:
    return NODES + node_id


def placement_key(shard: ShardId) -> str:
    return PLACEMENT + shard_segment(shard)


def owner_key(shard: ShardId) -> str:
    return OWNERS + shard_segment(shard)


def warm_key(shard: ShardId) -> str:
    return WARM + shard_segment(shard)


def epoch_key(shard: ShardId) -> str:
    return EPOCHS + shard_segment(shard)


def drain_key(node_id: str) -> str:
    return DRAINS + node_id


def audit_key(revision: int) -> str:
    return f"{AUDIT}{revision:012d}"


def secret_key(route: str) -> str:
    return SECRETS + route


def sealed_key_key(route: str) -> str:
    return SEALED_KEYS + route


def node_keys_key(node_id: str) -> str:
    return NODE_KEYS + node_id
