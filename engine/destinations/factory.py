"""Build a lane's destination adapter from ``[lanes.NAME]``.

``destination = "file"`` (``path``), ``"kafka"`` (``topic``, ``bootstrap``) or ``"pulsar"``
(``topic``, ``service_url``; ``handoff = "deliver_at"`` with ``lead_ms`` hands messages to
Pulsar early and lets Pulsar hold them until deliverAt).
"""

from __future__ import annotations

from pathlib import Path

from nereus.config import LaneSettings
from nereus.engine.destinations.protocol import Destination
from nereus.engine.shardlog.factory import DEFAULT_KAFKA_BOOTSTRAP, DEFAULT_PULSAR_URL

DEFAULT_LEAD_MS = 1_000


def handoff_lead_ms(lane: LaneSettings) -> int | None:
    """The lead of a deliver-at handoff lane (actionAt = deliverAt - lead), else None."""
    if lane.destination == "pulsar" and lane.options.get("handoff") == "deliver_at":
        return int(lane.options.get("lead_ms", DEFAULT_LEAD_MS))
    return None


def open_destination(lane: LaneSettings, home: Path) -> Destination:
    if lane.destination == "kafka":
        from nereus.engine.destinations.kafka import KafkaDestination

        return KafkaDestination(lane.name,
                                str(lane.options.get("bootstrap", DEFAULT_KAFKA_BOOTSTRAP)),
                                str(lane.options.get("topic", lane.name)))
    if lane.destination == "pulsar":
        from nereus.engine.destinations.pulsar import PulsarDestination

        return PulsarDestination(lane.name,
                                 str(lane.options.get("service_url", DEFAULT_PULSAR_URL)),
                                 str(lane.options.get("topic", lane.name)),
                                 deliver_at_handoff=handoff_lead_ms(lane) is not None)
    from nereus.engine.destinations.file import FileDestination

    assert lane.path is not None
    path = Path(lane.path)
    return FileDestination(lane.name, path if path.is_absolute() else home / path)
