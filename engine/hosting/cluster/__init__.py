"""A cluster node: membership, the leader's placement, and shard ownership through the
coordinator (``docs/ARCHITECTURE.md`` "Cluster")."""
