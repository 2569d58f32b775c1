"""Shard Log backends behind one Protocol (``protocol.ShardLog``): the file log here, Kafka
and Pulsar in their brokers' rooms (``factory.py`` opens the one a route names)."""
