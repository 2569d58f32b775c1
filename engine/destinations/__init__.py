"""Destination adapters behind one Protocol (file now; Kafka and Pulsar next)."""
