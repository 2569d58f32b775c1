"""Build a lane's destination adapter from ``[lanes.NAME]``.

``destination = "file"`` (``path``), ``"kafka"`` (``topic``, ``bootstrap``) or ``"pulsar"``
(``topic``, ``service_url``; ``handoff = "deliver_at"`` with ``lead_ms`` hands messages to
Pulsar early and lets Pulsar hold them until deliverAt).
"""

from __future__ import annotations

from pathlib import Path

from nereus.adapters.backends.destination.protocol import Destination
from nereus.adapters.backends.shardlog.factory import (
    DEFAULT_KAFKA_BOOTSTRAP,
    DEFAULT_PULSAR_ADMIN,
    DEFAULT_PULSAR_URL,
)
from nereus.config import LaneSettings


def open_destination(lane: LaneSettings, home: Path) -> Destination:
    if lane.destination == "kafka":
        from nereus.adapters.backends.kafka.kafka_destination import KafkaDestination
        from nereus.adapters.backends.kafka.kafka_transactions import (
            TransactionalKafkaDestination,
        )

        kind = TransactionalKafkaDestination if lane.fencing else KafkaDestination
        return kind(lane.name,
                    lane.bootstrap or DEFAULT_KAFKA_BOOTSTRAP,
                    lane.topic or lane.name,
                    replication_factor=lane.replication_factor)
    if lane.destination == "pulsar":
        from nereus.adapters.backends.pulsar.pulsar_destination import PulsarDestination

        if lane.fencing:
            from nereus.adapters.backends.pulsar.pulsar_fencing import (
                DeduplicatedPulsarDestination,
            )

            return DeduplicatedPulsarDestination(
                lane.name, lane.service_url or DEFAULT_PULSAR_URL, lane.topic or lane.name,
                deliver_at_handoff=lane.deliver_at_handoff,
                admin_url=lane.admin_url or DEFAULT_PULSAR_ADMIN)
        return PulsarDestination(lane.name,
                                 lane.service_url or DEFAULT_PULSAR_URL,
                                 lane.topic or lane.name,
                                 deliver_at_handoff=lane.deliver_at_handoff)
    from nereus.adapters.backends.destination.file_outbox import FileDestination

    assert lane.path is not None
    path = Path(lane.path)
    return FileDestination(lane.name, path if path.is_absolute() else home / path)
