"""The producer SDK's I/O: ``DelayClient`` and ``AsyncDelayClient`` over a route's Shard
Logs (file, Kafka, Pulsar), the engine's admin socket and the object store. The pure parts
(prepare, validate, retry policy, errors) are ``nereus.client``, which re-exports these."""
