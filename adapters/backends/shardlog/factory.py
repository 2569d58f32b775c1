"""Open a shard's Shard Log from its route's configuration (file, Kafka or Pulsar).

Defaults point at the local servers ``scripts/services`` starts: Kafka on
127.0.0.1:9092, Pulsar on pulsar://127.0.0.1:6650 (admin http://127.0.0.1:8080). The
Command Topic is ``nereus.<route>.commands`` (Kafka) or
``persistent://public/default/nereus-<route>-commands`` (Pulsar), one partition per shard,
unless ``topic`` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.config import RouteSettings
from nereus.layout import HomeLayout
from nereus.shard import ShardId

DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_PULSAR_URL = "pulsar://127.0.0.1:6650"
DEFAULT_PULSAR_ADMIN = "http://127.0.0.1:8080"


def command_topic(route: RouteSettings) -> str:
    if route.topic:
        return route.topic
    if route.log == "pulsar":
        return f"nereus-{route.name}-commands"
    return f"nereus.{route.name}.commands"


def open_shard_log(route: RouteSettings, shard: ShardId, home: Path, *,
                   create: bool = True, clock_ms: Callable[[], int] | None = None) -> ShardLog:
    """The shard's log. ``clock_ms`` is the file log's broker clock (the writer's wall
    clock: the engine passes its own Clock's); Kafka and Pulsar brokers keep their own."""
    if route.log == "kafka":
        from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog

        return KafkaShardLog(route.bootstrap or DEFAULT_KAFKA_BOOTSTRAP,
                             command_topic(route), shard.partition,
                             partitions=route.partitions, create=create,
                             retention_ms=route.retention_ms,
                             replication_factor=route.replication_factor,
                             min_insync_replicas=route.min_insync_replicas)
    if route.log == "pulsar":
        from nereus.adapters.backends.pulsar.pulsar_command_topic import ensure_partitioned_topic
        from nereus.adapters.backends.pulsar.pulsar_log import PulsarShardLog

        admin = route.admin_url or DEFAULT_PULSAR_ADMIN
        if create:
            ensure_partitioned_topic(admin, command_topic(route), route.partitions)
        return PulsarShardLog(route.service_url or DEFAULT_PULSAR_URL,
                              command_topic(route), shard.partition, admin_url=admin)
    from nereus.adapters.backends.shardlog.file_log import FileShardLog

    if clock_ms is None:
        return FileShardLog(HomeLayout(home).shard_log(shard), create=create)
    return FileShardLog(HomeLayout(home).shard_log(shard), create=create, clock_ms=clock_ms)
