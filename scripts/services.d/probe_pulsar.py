"""The Pulsar readiness probe (one message through the binary protocol, the admin API) and
its feature checks (delayed delivery, broker entry metadata).

Needs ``pulsar-client``, imported where used.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import TYPE_CHECKING

from probe_support import HOST, env

if TYPE_CHECKING:
    import pulsar


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("nereus.probe.pulsar-client")
    quiet.setLevel(logging.CRITICAL)
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    return quiet


def _token() -> str | None:
    """A secured broker's token (scripts/services sets the file for pulsar-secure)."""
    path = os.environ.get("NEREUS_PULSAR_PROBE_TOKEN_FILE")
    return open(path).read().strip() if path else None


def pulsar_client(budget: float) -> tuple[str, pulsar.Client]:
    import pulsar

    url = os.environ.get("NEREUS_PULSAR_PROBE_URL") or \
        f"pulsar://{HOST}:{env('NEREUS_PULSAR_PORT', '6650')}"
    token = _token()
    secured = {} if token is None else {
        "authentication": pulsar.AuthenticationToken(token),
        "tls_trust_certs_file_path": os.environ["NEREUS_PULSAR_PROBE_CA"],
        "tls_validate_hostname": True}
    return url, pulsar.Client(
        url,
        **secured,
        operation_timeout_seconds=max(1, int(budget)),
        connection_timeout_ms=max(1000, min(int(budget * 1000), 10000)),
        # the client logs every refused connection while the broker starts; failures that
        # matter surface as exceptions (and the last one is reported on timeout)
        logger=_quiet_logger(),
    )


def pulsar_round_trip(budget: float) -> str:
    import pulsar

    url, client = pulsar_client(budget)
    topic = "persistent://public/default/nereus-probe"
    payload = f"probe-{uuid.uuid4()}".encode()
    try:
        consumer = client.subscribe(
            topic,
            f"nereus-probe-{uuid.uuid4()}",
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Latest,
        )
        producer = client.create_producer(topic, send_timeout_millis=max(1000, int(budget * 1000)))
        msg_id = producer.send(payload)
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            try:
                got = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(got)
            if got.data() == payload:
                consumer.unsubscribe()
                _, clusters = pulsar_http("/admin/v2/clusters", budget)
                return (
                    f"pulsar ok: {url} topic={topic} message_id={msg_id} round trip; "
                    f"admin http clusters={clusters.decode()}"
                )
        raise RuntimeError("produced message not consumed back in time")
    finally:
        client.close()


def pulsar_http(path: str, budget: float) -> tuple[dict[str, str], bytes]:
    import urllib.request

    url = f"http://{HOST}:{env('NEREUS_PULSAR_HTTP_PORT', '8080')}{path}"
    token = _token()
    if token is not None:
        return {}, b"(token-secured; admin checked by the tests)"
    with urllib.request.urlopen(url, timeout=max(1.0, budget)) as resp:
        return dict(resp.headers.items()), resp.read()


def pulsar_features(budget: float) -> str:
    """Delayed delivery is honoured; entries carry broker entry metadata (timestamp + index)."""
    import datetime
    import json

    import pulsar

    _url, client = pulsar_client(budget)
    short = f"nereus-probe-features-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{short}"
    out = []
    try:
        # Delayed delivery only applies to Shared (and Key_Shared) subscriptions.
        consumer = client.subscribe(topic, "nereus-probe", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        sent_at = time.monotonic()
        delayed_id = producer.send(b"delayed", deliver_after=datetime.timedelta(seconds=2))
        producer.send(b"now")
        first = consumer.receive(timeout_millis=int(budget * 1000))
        consumer.acknowledge(first)
        second = consumer.receive(timeout_millis=int(budget * 1000))
        waited = time.monotonic() - sent_at
        consumer.acknowledge(second)
        order = [first.data(), second.data()]
        if order != [b"now", b"delayed"] or waited < 1.8:
            raise RuntimeError(f"delayed delivery not honoured: order={order} waited={waited:.2f}s")
        out.append(
            f"delayed delivery ok (deliver_after=2s message came {waited:.2f}s after send, "
            "after the undelayed one)"
        )

        # The Python client has no accessor for broker entry metadata; the admin API shows it.
        headers, _ = pulsar_http(
            f"/admin/v2/persistent/public/default/{short}/ledger/{delayed_id.ledger_id()}/entry/{delayed_id.entry_id()}",
            budget,
        )
        ts = headers.get("X-Pulsar-Broker-Entry-METADATA-timestamp")
        idx = headers.get("X-Pulsar-Broker-Entry-METADATA-index")
        if ts is None or idx is None:
            raise RuntimeError(f"no broker entry metadata on the stored entry: headers={headers}")
        out.append(f"broker entry metadata on entries ok (broker timestamp {ts}, index {idx})")

        _, body = pulsar_http("/admin/v2/brokers/configuration/runtime", budget)
        runtime = json.loads(body)
        keys = (
            "delayedDeliveryEnabled",
            "exposingBrokerEntryMetadataToClientEnabled",
            "brokerEntryMetadataInterceptors",
        )
        out.append("runtime config " + ", ".join(f"{k}={runtime.get(k)}" for k in keys))
        consumer.unsubscribe()
    finally:
        client.close()
    return "pulsar features:\n  " + "\n  ".join(out)
