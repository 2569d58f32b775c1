"""The partitioned Command Topic a Pulsar Shard Log lives on, made through the admin REST API.

The topic has one partition per shard and infinite retention: the log is the source of
truth for replay, so Pulsar must never trim it (``ack`` moves a subscription cursor, and
with the default retention an acknowledged ledger would be deleted). Partitions are never
added to an existing topic: that would move messages between shards.
"""

from __future__ import annotations

from typing import Final

from nereus.adapters.backends.pulsar.pulsar_client import (
    TopicMisconfigured,
    admin_reason,
    admin_request,
    admin_topic_path,
    full_topic,
)
from nereus.errors import NereusError

INFINITE_RETENTION: Final = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}


def ensure_partitioned_topic(
    admin_url: str, topic: str, partitions: int, *, timeout_s: float = 30
) -> bool:
    """Make sure the Command Topic exists with at least ``partitions`` partitions and
    infinite retention; returns whether this call created it.

    A topic that exists without partitions, or with fewer, is ``TopicMisconfigured`` (adding
    partitions would move messages between shards, so it is never done here). Retention is
    set at topic level unless the effective policy is already infinite.
    """
    if partitions < 1:
        raise ValueError(f"a Command Topic needs at least one partition, not {partitions}")
    name = full_topic(topic)
    path = f"admin/v2/{admin_topic_path(name)}"
    status, body = admin_request(admin_url, "PUT", f"{path}/partitions", partitions,
                                 timeout_s=timeout_s)
    created = status in (200, 204)
    if not created:
        if status != 409:
            raise NereusError(f"Pulsar admin at {admin_url} refused to create {name} with "
                              f"{partitions} partitions: HTTP {status}: {admin_reason(body)}")
        _check_partitions(admin_url, name, path, partitions, timeout_s)
    _ensure_infinite_retention(admin_url, name, path, timeout_s)
    return created


def _check_partitions(
    admin_url: str, name: str, path: str, partitions: int, timeout_s: float
) -> None:
    """Raise unless the existing topic ``name`` has at least ``partitions`` partitions."""
    status, body = admin_request(admin_url, "GET", f"{path}/partitions", timeout_s=timeout_s)
    have = body.get("partitions") if isinstance(body, dict) else None
    if status != 200 or not isinstance(have, int):
        raise NereusError(f"Pulsar admin at {admin_url}: cannot read the partitions of "
                          f"{name}: HTTP {status}: {admin_reason(body)}")
    if have == 0:
        raise TopicMisconfigured(
            f"Pulsar topic {name} exists but is not partitioned; a Command Topic needs "
            f"{partitions} partitions", hint="delete it or configure another topic")
    if have < partitions:
        raise TopicMisconfigured(
            f"Pulsar topic {name} has {have} partition(s); {partitions} are needed",
            hint="use another topic: adding partitions would move messages between shards")


def _ensure_infinite_retention(admin_url: str, name: str, path: str, timeout_s: float) -> None:
    """Set retention -1/-1 on the topic unless its effective policy already is."""
    status, body = admin_request(admin_url, "GET", f"{path}/retention?applied=true",
                                 timeout_s=timeout_s)
    if (status == 200 and isinstance(body, dict) and
            body.get("retentionTimeInMinutes") == -1 and body.get("retentionSizeInMB") == -1):
        return
    status, body = admin_request(admin_url, "POST", f"{path}/retention",
                                 INFINITE_RETENTION, timeout_s=timeout_s)
    if status not in (200, 204):
        raise TopicMisconfigured(
            f"Pulsar admin at {admin_url} refused infinite retention on {name}: HTTP "
            f"{status}: {admin_reason(body)}",
            hint="set retention -1/-1 on the topic or its namespace: without it Pulsar "
            "deletes acknowledged ledgers of the Shard Log")
