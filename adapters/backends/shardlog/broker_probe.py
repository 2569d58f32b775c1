"""A quick, quiet "does the broker answer?" before a command opens a broker Shard Log.

Opening a Kafka or Pulsar log when the broker is down costs the clients' own timeouts (30 s
and more) and, with librdkafka, a thousand lines of reconnect chatter on stderr before the
error that matters. ``probe_route`` asks once, with a deadline (5 s by default), without a
broker client's logs reaching the terminal:

* Kafka: a metadata request from an AdminClient whose librdkafka log lines go to a logger
  nobody serves (they are dropped with the client) instead of stderr
  (``nereus.adapters.backends.kafka.kafka_probe``);
* Pulsar: a TCP connection to the broker's service URL and a GET of the admin API's
  cluster list, so no Pulsar client (whose C++ logs go to stderr) is made at all.

A route that answered is not asked again by the same process.
"""

from __future__ import annotations

import socket
import ssl
from typing import Final
from urllib.parse import urlsplit

from nereus.adapters.backends.shardlog.factory import (
    DEFAULT_KAFKA_BOOTSTRAP,
    DEFAULT_PULSAR_ADMIN,
    DEFAULT_PULSAR_URL,
)
from nereus.config import RouteSettings
from nereus.errors import ServiceUnreachable

PROBE_TIMEOUT_S: Final = 5.0

_answered: set[tuple[str, str]] = set()


def probe_route(route: RouteSettings, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise ``ServiceUnreachable`` within about ``timeout_s`` if the route's broker does
    not answer; return at once for the file log."""
    if route.log == "kafka":
        from nereus.adapters.backends.kafka.kafka_probe import probe_kafka

        probe_kafka(route.bootstrap or DEFAULT_KAFKA_BOOTSTRAP, timeout_s)
    elif route.log == "pulsar":
        _probe_pulsar(route.service_url or DEFAULT_PULSAR_URL,
                      route.admin_url or DEFAULT_PULSAR_ADMIN, timeout_s)


def _probe_pulsar(service_url: str, admin_url: str, timeout_s: float) -> None:
    if ("pulsar", service_url) in _answered:
        return
    import urllib.error
    import urllib.request

    target = urlsplit(service_url)
    host, port = target.hostname or "127.0.0.1", target.port or 6650
    hint = ("is the broker running and are service_url and admin_url right? "
            "(`scripts/services up pulsar` starts a local one)")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ServiceUnreachable(f"Pulsar at {service_url} did not answer within "
                                 f"{timeout_s:g} s: {exc}", hint=hint) from None
    from nereus.adapters.backends.pulsar.pulsar_security import admin_request_options

    headers, context = admin_request_options(admin_url)
    request = urllib.request.Request(f"{admin_url.rstrip('/')}/admin/v2/clusters",
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context):
            pass
    except urllib.error.HTTPError as exc:
        if exc.code == 401:  # it answered, and refused our token
            raise ServiceUnreachable(f"the Pulsar admin API at {admin_url} refused our "
                                     "credentials: 401 Unauthorized",
                                     hint=_pulsar_hint(admin_url) or hint) from None
    except OSError as exc:
        tls = isinstance(exc, ssl.SSLError) or isinstance(getattr(exc, "reason", None),
                                                          ssl.SSLError)
        said = "failed TLS" if tls else f"did not answer within {timeout_s:g} s"
        raise ServiceUnreachable(f"the Pulsar admin API at {admin_url} {said}: {exc}",
                                 hint=_pulsar_hint(admin_url) or hint) from None
    _answered.add(("pulsar", service_url))


def _pulsar_hint(url: str) -> str | None:
    from nereus.adapters.backends.pulsar.pulsar_security import refusal_hint

    return refusal_hint(url)
