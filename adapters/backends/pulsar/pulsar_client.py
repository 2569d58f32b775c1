"""What the Pulsar Shard Log and the Pulsar destination share: names, clients, errors, admin.

``pulsar`` is imported inside functions, so ``nereus --help`` never loads it. A short topic
name means ``persistent://public/default/<name>``. The C++ client logs to a ``FileLogger``
(its console logger would corrupt JSON output; a Python logger can abort the interpreter at
exit). Unreachable brokers are ``ServiceUnreachable`` naming the URL; refusals a
``NereusError``. The client's operation timeout is not a deadline, so ``call_within`` runs
an open on a helper thread it owns and, at the deadline, closes the client and raises
``ServiceUnreachable`` (``docs/decisions/0024-broker-calls-under-our-deadlines.md``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Final, TypeVar

from nereus.adapters.backends.pulsar.pulsar_security import (
    admin_request_options,
    client_options,
    connection_for,
    refusal_hint,
)
from nereus.errors import NereusError, ServiceUnreachable, UsageError

T = TypeVar("T")

DEFAULT_TENANT_NAMESPACE: Final = "public/default"

# result / exception names that say "no broker answered (in time)", not "the broker said no"
UNREACHABLE_RESULTS: Final = frozenset({
    "Timeout", "ConnectError", "LookupError", "NotConnected", "ServiceUnitNotReady",
    "TooManyLookupRequestException", "ReadError", "BrokerMetadataError",
})

_LATE_CALL_JOIN_S: Final = 5.0


class TopicMisconfigured(UsageError):
    """A topic exists but cannot serve as asked (not partitioned, too few partitions, no
    infinite retention)."""


def full_topic(topic: str) -> str:
    """``persistent://public/default/<topic>`` for a short name; a full name unchanged."""
    if "://" in topic:
        return topic
    return f"persistent://{DEFAULT_TENANT_NAMESPACE}/{topic}"


def admin_topic_path(topic: str) -> str:
    """The admin REST path of a topic: ``persistent/<tenant>/<namespace>/<name>``."""
    domain, _, rest = full_topic(topic).partition("://")
    return f"{domain}/{rest}"


def partition_topic(topic: str, partition: int) -> str:
    """The full name of one partition of a partitioned topic."""
    return f"{full_topic(topic)}-partition-{partition}"


def result_name(value: object) -> str:
    """The Pulsar result name of a ``pulsar.Result`` or a pulsar exception (else the type)."""
    name = getattr(value, "name", None)
    if isinstance(name, str) and type(value).__name__ == "Result":
        return name
    return type(value).__name__


def is_pulsar_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of pulsar-client's exceptions (``pulsar.PulsarException``)."""
    from pulsar import PulsarException

    return isinstance(exc, PulsarException)


def unreachable(service_url: str, doing: str, detail: object) -> ServiceUnreachable:
    """No answer from ``service_url`` (a refused token looks the same to pulsar-client: the
    admin API is asked whether it refuses the token, and then it says so)."""
    from nereus.adapters.backends.pulsar.pulsar_token_check import token_refused

    connection = connection_for(service_url)
    where = f" ([pulsar.{connection.name}])" if connection is not None else ""
    refused = "; its admin API refused the same token: 401 Unauthorized" if \
        token_refused(service_url) else ""
    return ServiceUnreachable(
        f"Pulsar at {service_url}{where} is unreachable ({doing}): {detail}{refused}",
        hint=refusal_hint(service_url) or "is the broker running and is the service URL "
        "right? (`scripts/services up pulsar` starts a local one)",
    )


def translate(exc: BaseException, service_url: str, doing: str) -> NereusError:
    """The error to raise for a client exception: ``ServiceUnreachable`` when no broker
    answered, else a ``NereusError`` naming the broker's refusal."""
    if isinstance(exc, NereusError):
        return exc
    name = result_name(exc)
    if name in UNREACHABLE_RESULTS:
        return unreachable(service_url, doing, f"{name}: {exc}")
    return NereusError(f"Pulsar at {service_url} refused {doing}: {name}: {exc}")


def make_client(service_url: str, *, timeout_s: float, log_path: str | None = None) -> Any:
    """A ``pulsar.Client`` whose operations and connections time out within ``timeout_s``.

    Creating it does not contact the broker."""
    import pulsar

    return pulsar.Client(
        service_url,
        **client_options(service_url),  # a [pulsar.NAME]'s TLS and token or certificate
        operation_timeout_seconds=max(1, math.ceil(timeout_s)),
        connection_timeout_ms=max(100, min(int(timeout_s * 1000), 10_000)),
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Warn, log_path or os.devnull),
    )


def call_within(
    timeout_s: float, fn: Callable[[], T], *, client: Any, service_url: str, doing: str
) -> T:
    """``fn()``, or ``ServiceUnreachable`` if it has not returned after ``timeout_s``.

    ``fn`` runs in a helper thread owned by this call. On the deadline the client is
    closed, which makes the pending call return, and the thread is joined; whatever it
    returned is discarded with the closed client. An exception ``fn`` raised is re-raised
    as it is (the caller translates pulsar's, knowing what it was doing)."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller below
            box.append((False, exc))

    worker = threading.Thread(target=run, name=f"pulsar-open: {doing}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive() or not box:
        # the client may already be failing; it is discarded anyway
        with contextlib.suppress(Exception):
            client.close()
        worker.join(_LATE_CALL_JOIN_S)
        raise unreachable(service_url, doing, f"no answer within {timeout_s:g}s")
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


# admin REST ---------------------------------------------------------------------------------
def admin_request(
    admin_url: str, method: str, path: str, body: object = None, *, timeout_s: float
) -> tuple[int, Any]:
    """One admin REST call; returns (HTTP status, decoded JSON or None).

    An HTTP error status is returned, not raised; no answer at all is ``ServiceUnreachable``.
    """
    url = admin_url.rstrip("/") + "/" + path.lstrip("/")
    data = None if body is None else json.dumps(body).encode()
    secured, context = admin_request_options(admin_url)
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json", **secured})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServiceUnreachable(
            f"the Pulsar admin API at {admin_url} is unreachable ({method} {path}): {reason}",
            hint=refusal_hint(admin_url) or "is the broker running and is admin_url right? "
            "(`scripts/services up pulsar` starts a local one)") from None
    if status == 401:
        raise ServiceUnreachable(
            f"the Pulsar admin API at {admin_url} refused our credentials ({method} {path}): "
            "401 Unauthorized", hint=refusal_hint(admin_url) or "give the connection a token: "
            "a [pulsar.NAME] table with token_file, named by the route or lane")
    try:
        decoded = json.loads(raw) if raw else None
    except ValueError:
        decoded = raw.decode(errors="replace")
    return status, decoded


def admin_reason(decoded: Any) -> str:
    """The broker's explanation in an admin error body."""
    if isinstance(decoded, dict) and "reason" in decoded:
        return str(decoded["reason"])
    return str(decoded)


def quote_path(path: str) -> str:
    return urllib.parse.quote(path, safe="/")
