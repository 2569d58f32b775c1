"""Shard Log backends behind one Protocol (``protocol.ShardLog``)."""
