"""The Command Topic a Kafka Shard Log lives on: created as a Shard Log needs it, or checked.

* **Broker persistence time.** A Command Topic is created with
  ``message.timestamp.type=LogAppendTime``, so each record's timestamp is set by the broker
  when it appends the batch. An existing topic is checked for this; a CreateTime topic is
  refused (``TopicMisconfigured``) because its times would be the producer's clock.
* **No gaps.** ``cleanup.policy=delete``: compaction would remove records and leave gaps in
  the dense offsets of a Shard Log, so a compacted topic is refused.
* **Kept and replicated.** Recovery needs every record above the Recovery Floor: records
  are kept forever unless a retention is configured (doctor compares it with the floor),
  replicated as widely as the cluster allows (at most 3), ``min.insync.replicas`` at most 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from nereus.adapters.backends.kafka.kafka_client import (
    TopicMisconfigured,
    broker_count,
    ensure_topic,
    topic_settings,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

COMMAND_TOPIC_CONFIG: Final = {
    "message.timestamp.type": "LogAppendTime",
    "cleanup.policy": "delete",
}
KEEP_FOREVER: Final = -1  # retention.ms of a Command Topic unless configured


def prepare_command_topic(
    admin: AdminClient,
    bootstrap: str,
    topic: str,
    *,
    client_id: str,
    partitions: int,
    create: bool,
    timeout_s: float,
    retention_ms: int,
    replication_factor: int | None,
    min_insync_replicas: int | None,
) -> None:
    """Create the Command Topic ``topic`` (when missing and ``create`` is set) or check the
    one that exists; raises ``TopicMisconfigured`` for a topic that cannot serve."""
    factor = replication_factor or min(3, broker_count(admin, bootstrap, timeout_s))
    in_sync = min_insync_replicas or min(2, factor)
    created = ensure_topic(
        bootstrap, topic, client_id=client_id, partitions=partitions,
        config={**COMMAND_TOPIC_CONFIG, "retention.ms": str(retention_ms),
                "min.insync.replicas": str(in_sync)},
        create=create, timeout_s=timeout_s, admin=admin, replication_factor=factor)
    if not created:
        check_command_topic(bootstrap, topic, topic_settings(admin, bootstrap, topic, timeout_s))


def check_command_topic(bootstrap: str, topic: str, settings: Mapping[str, str]) -> None:
    """Raise ``TopicMisconfigured`` unless ``settings`` (the topic's effective configuration)
    stamp records with the broker's time and never compact."""
    where = f"Kafka at {bootstrap}: Command Topic {topic}"
    kind = settings.get("message.timestamp.type", "")
    if kind != "LogAppendTime":
        raise TopicMisconfigured(
            f"{where} has message.timestamp.type={kind or '?'}; a Shard Log needs "
            "LogAppendTime so record times are the broker's persistence time",
            hint=f"kafka-configs --bootstrap-server {bootstrap} --alter --entity-type "
            f"topics --entity-name {topic} --add-config "
            "message.timestamp.type=LogAppendTime")
    policy = settings.get("cleanup.policy", "delete")
    if "compact" in policy:
        raise TopicMisconfigured(
            f"{where} has cleanup.policy={policy}; compaction removes records and "
            "leaves gaps in a Shard Log", hint="use cleanup.policy=delete")
