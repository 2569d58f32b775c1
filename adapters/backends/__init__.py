"""The backends behind the engine's Protocols: Shard Logs, destinations, object stores and
coordinators, one module per implementation; each broker's client code in one room
(``kafka/``, ``pulsar/``)."""
