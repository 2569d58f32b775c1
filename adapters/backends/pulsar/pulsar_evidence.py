"""What marks a message the Pulsar destination published, and reading one back by its
evidence (``pulsar:TOPIC@LEDGER:ENTRY:PARTITION``) to verify an operator's reference.

Every published message carries three properties: ``nereus-delay-message-id``,
``nereus-attempt-id`` and ``nereus-evidence-mac``. ``pulsar`` is imported inside the
functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from nereus.adapters.backends.destination.evidence_fetch import FETCH_TIMEOUT_S, Fetched
from nereus.adapters.backends.pulsar.pulsar_client import make_client, partition_topic, result_name
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.config import LaneSettings
from nereus.errors import NotFound
from nereus.evidence_mac import ExpectedMac, mac_accepted

PROPERTY_DELAY_MESSAGE_ID: Final = "nereus-delay-message-id"
PROPERTY_ATTEMPT_ID: Final = "nereus-attempt-id"
PROPERTY_EVIDENCE_MAC: Final = "nereus-evidence-mac"

_READ_WAIT_MS: Final = 2_000
# the first pause before asking a reader again while the broker re-attaches it after a seek
# (the client reconnects a consumer the broker closed 0.1 s later, then backs off); doubled
# each time up to the cap
_REATTACH_PAUSE_S: Final = 0.05
_REATTACH_PAUSE_CAP_S: Final = 1.0


def fetch_record(where: str, lane: LaneSettings, topic: str, ledger: int, entry: int,
                 partition: int) -> Fetched:
    """The attempt id and MAC the message at ``ledger:entry`` of ``topic``'s ``partition``
    carries (``where`` names it in errors); NotFound when there is none."""
    import pulsar

    from nereus.adapters.backends.shardlog.factory import DEFAULT_PULSAR_URL

    client = make_client(lane.service_url or DEFAULT_PULSAR_URL, timeout_s=FETCH_TIMEOUT_S)
    try:
        name = topic if partition < 0 else partition_topic(topic, partition)
        reader = client.create_reader(name, pulsar.MessageId(max(partition, -1), ledger, entry,
                                                             -1),
                                      start_message_id_inclusive=True)
        try:
            message = reader.read_next(timeout_millis=int(FETCH_TIMEOUT_S * 1000))
        except pulsar.Timeout:
            raise NotFound(f"{where}: no such message") from None
        finally:
            reader.close()
        found = message.message_id()
        if (found.ledger_id(), found.entry_id()) != (ledger, entry):
            raise NotFound(f"{where}: no such message (the next one is "
                           f"{found.ledger_id()}:{found.entry_id()})")
        properties = message.properties()
        return Fetched(where, properties.get(PROPERTY_ATTEMPT_ID),
                       properties.get(PROPERTY_EVIDENCE_MAC))
    finally:
        client.close()


def has_message_available(reader: Any, deadline: float, *,
                          clock: Clock = SYSTEM_CLOCK) -> bool:
    """``reader.has_message_available()``, asked again while the broker has not re-attached
    the reader after a ``seek``.

    A seek makes the broker close the reader's consumer and the client re-subscribe it a
    moment later; a question that reaches the broker in between is refused with
    ``BrokerMetadataError`` ("Consumer not found"; apache/pulsar-client-go#577 and
    fsprojects/pulsar-client-dotnet#343 describe the same race in other clients). It is
    asked again after a growing pause until ``deadline`` (on ``clock.monotonic()``); then,
    or on any other error, the error is raised."""
    wait = _REATTACH_PAUSE_S
    while True:
        try:
            return bool(reader.has_message_available())
        except Exception as exc:
            if result_name(exc) != "BrokerMetadataError" or clock.monotonic() + wait > deadline:
                raise
        clock.sleep(wait)
        wait = min(wait * 2, _REATTACH_PAUSE_CAP_S)


def message_evidence(topic: str, message_id: Any) -> str:
    """``pulsar:<topic>@<ledger>:<entry>:<partition>`` (partition -1: not partitioned)."""
    return (f"pulsar:{topic}@{message_id.ledger_id()}:{message_id.entry_id()}:"
            f"{message_id.partition()}")


def scan_topic(client: Any, topic: str, wanted: Mapping[str, ExpectedMac], since_ms: int,
               until_ms: int, deadline: float) -> dict[str, str]:
    """Wanted attempt ids found on ``topic``'s partitions, with the MAC ``wanted`` expects
    for them, between ``since_ms`` and ``until_ms`` (publish time), mapped to their
    MessageId evidence; stops when all are found, at the end of each partition, past
    ``until_ms``, or at ``deadline`` (on ``SYSTEM_CLOCK.monotonic()``)."""
    import pulsar

    found: dict[str, str] = {}
    partitions = client.get_topic_partitions(topic)
    for partition in partitions:
        reader = client.create_reader(partition, pulsar.MessageId.earliest)
        try:
            if since_ms > 0:
                reader.seek(since_ms)
            while len(found) < len(wanted) and SYSTEM_CLOCK.monotonic() < deadline:
                if not has_message_available(reader, deadline):
                    break
                try:
                    message = reader.read_next(timeout_millis=_READ_WAIT_MS)
                except pulsar.Timeout:
                    break
                if message.publish_timestamp() > until_ms:
                    break
                properties = message.properties()
                attempt_id = properties.get(PROPERTY_ATTEMPT_ID)
                if attempt_id in wanted and mac_accepted(
                        str(properties.get(PROPERTY_EVIDENCE_MAC, "")),
                        wanted[attempt_id]):
                    found[attempt_id] = message_evidence(topic, message.message_id())
        finally:
            with contextlib.suppress(Exception):  # a reader that will not close
                reader.close()
    return found
