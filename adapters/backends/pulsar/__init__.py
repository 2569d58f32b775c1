"""Everything that speaks Pulsar (pulsar-client, the admin REST API): names and clients, the
Pulsar Shard Log and the Pulsar destination."""
