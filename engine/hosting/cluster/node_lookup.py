"""Who owns a shard, in words, from the cluster's records (the admin API's
``OwnerLookup``)."""

from __future__ import annotations

from nereus.adapters.cluster.cluster_store import ClusterStore
from nereus.shard import ShardId


class StoreOwnerLookup:
    """``OwnerLookup`` over a cluster's records."""

    def __init__(self, store: ClusterStore) -> None:
        self.store = store

    def owner_of(self, shard: ShardId) -> str | None:
        owned = self.store.owners().get(shard)
        if owned is None:
            return None
        member = self.store.members().get(owned.record.node_id)
        where = "" if member is None else f" on {member.host}, admin socket {member.address}"
        return (f"node {owned.record.node_id}{where} "
                f"(epoch {owned.record.epoch}, {owned.record.state})")
