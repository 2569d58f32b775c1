"""Everything that speaks Kafka (confluent-kafka): client settings, the Kafka Shard Log and
the Kafka destination."""
