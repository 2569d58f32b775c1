"""A quick, quiet "does the Kafka broker answer?" (``shardlog.broker_probe`` asks it before a
command opens a Kafka Shard Log; ``doctor`` asks it too): a metadata request from an
AdminClient whose librdkafka log lines go to a logger nobody serves (they are dropped with
the client) instead of stderr. A bootstrap that answered is not asked again by the same
process.
"""

from __future__ import annotations

import logging
import time

from nereus.adapters.backends.kafka.kafka_client import KafkaConfig, metadata
from nereus.adapters.backends.kafka.kafka_security import (
    KafkaRefused,
    error_callback,
    security_settings,
)
from nereus.adapters.backends.shardlog.broker_probe import PROBE_TIMEOUT_S
from nereus.errors import NereusError, ServiceUnreachable

_answered: set[tuple[str, str]] = set()
_QUIET = logging.getLogger("nereus.broker_probe.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def probe_kafka(bootstrap: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise ``ServiceUnreachable`` within about ``timeout_s`` if no Kafka broker at
    ``bootstrap`` answers a metadata request; librdkafka's lines go nowhere."""
    if ("kafka", bootstrap) in _answered:
        return
    from confluent_kafka.admin import AdminClient

    settings: KafkaConfig = {"bootstrap.servers": bootstrap, "client.id": "nereus-probe",
                             "socket.timeout.ms": max(1, int(timeout_s * 1000)),
                             "logger": _QUIET, "error_cb": error_callback(bootstrap),
                             **security_settings(bootstrap)}
    admin = AdminClient(settings)  # type: ignore[arg-type]  # the stubs omit "logger"
    started = time.monotonic()
    try:
        metadata(admin, bootstrap, "a metadata request", timeout_s)
    except KafkaRefused:
        raise  # the broker answered and refused: what to fix is in its hint
    except NereusError as exc:
        raise ServiceUnreachable(
            f"Kafka at {bootstrap} did not answer within {timeout_s:g} s "
            f"({time.monotonic() - started:.1f} s): {exc.message}",
            hint="is the broker running and is the bootstrap address right? "
                 "(`scripts/services up kafka` starts a local one)") from None
    _answered.add(("kafka", bootstrap))
