"""Destinations behind one Protocol (``protocol.Destination``): the file outbox here, Kafka
and Pulsar in their brokers' rooms (``factory.py`` opens the one a lane names)."""
