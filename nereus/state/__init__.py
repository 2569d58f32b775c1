"""Shard state: the RocksDB key schema, stored values, the store and the state digest."""
