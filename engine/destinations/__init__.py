"""Destination adapters behind one Protocol: a file outbox, Kafka and Pulsar (``factory.py``
opens the one a lane names)."""
