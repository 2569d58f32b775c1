"""A Pulsar lane with ``fencing = true``: broker deduplication, a named producer per shard
and the attempt's admitted position as its sequence id, so the next owner's fence makes
absence proof (``adapters/backends/pulsar/pulsar_fencing.py``).

Two destination objects stand for the old and the new owner of one shard, against the
broker of ``scripts/services up pulsar``; the test turns deduplication on for its own topic
through the admin API.
"""

from __future__ import annotations

import time

import pytest

from nereus.adapters.backends.destination.fencing import FENCED_ABSENCE, NotFenced
from nereus.adapters.backends.destination.protocol import PublishRequest
from nereus.adapters.backends.pulsar.pulsar_client import admin_request, admin_topic_path
from nereus.adapters.backends.pulsar.pulsar_fencing import DeduplicatedPulsarDestination
from nereus.publish import PublishTemplate
from nereus.records import Outcome
from tests.integration.pulsar_service import PulsarService, pulsar_service, unique_topic
from tests.polling import wait_until

__all__ = ["pulsar_service"]  # the session fixture, imported so pytest finds it here

SHARD = "default/0"


def _request(attempt: str, sequence: int) -> PublishRequest:
    template = PublishTemplate(delay_message_id=f"m-{attempt}", generation=1, lane="dd",
                               deliver_at_ms=0, action_at_ms=0, key="k", headers={},
                               payload=b"payload")
    return PublishRequest(attempt, template, f"mac-{attempt}", shard=SHARD, sequence=sequence)


def _now() -> int:
    return time.time_ns() // 1_000_000


def deduplicated_topic(admin_url: str, *, dedup: bool = True) -> str:
    """A new topic of its own, with broker deduplication on (or off)."""
    topic = unique_topic("nereus-fenced")
    path = f"admin/v2/{admin_topic_path(topic)}"
    status, body = admin_request(admin_url, "PUT", path, timeout_s=30)
    assert status in (200, 204), body
    status, body = admin_request(admin_url, "POST", f"{path}/deduplicationEnabled", dedup,
                                 timeout_s=30)
    assert status in (200, 204), body
    # a topic policy reaches the loaded topic asynchronously (CI under load once published
    # before it had): wait until the broker's topic says it deduplicates
    wanted = "Enabled" if dedup else "Disabled"
    wait_until(f"deduplication {wanted} on {topic}", lambda: admin_request(
        admin_url, "GET", f"{path}/stats", timeout_s=30)[1].get("deduplicationStatus")
        == wanted, 30)
    return topic


@pytest.mark.timeout(120)
def test_the_next_owner_takes_the_producer_name_and_proves_absence(
        pulsar_service: PulsarService) -> None:
    """While the old owner's producer is connected the name cannot be taken (no proof);
    once it is gone, the records it stored are found and the attempt it never sent is absent
    with 'fenced absence (pulsar deduplication)' evidence; a resend at or below the last
    persisted sequence id is dropped by the broker and UNKNOWN, never PUBLISHED."""
    endpoint = pulsar_service.require()
    topic = deduplicated_topic(endpoint.admin_url)
    since = _now() - 60_000

    def destination() -> DeduplicatedPulsarDestination:
        return DeduplicatedPulsarDestination("dd", endpoint.service_url, topic,
                                             admin_url=endpoint.admin_url)

    old = destination()
    results = old.publish([_request("answered", 10), _request("answer-lost", 11)], _now)
    assert [r.outcome for r in results] == [Outcome.PUBLISHED] * 2
    new = destination()
    wanted = {a: f"mac-{a}" for a in ("answered", "answer-lost", "never-sent")}
    with pytest.raises(NotFenced, match="producer name"):
        new.fence(SHARD, wanted, since)
    old.close()  # the old owner died: its connection closed
    fenced = new.fence(SHARD, wanted, since)
    assert set(fenced.found) == {"answered", "answer-lost"}
    assert fenced.absent.startswith(f"{FENCED_ABSENCE} (pulsar deduplication): ")
    assert "sequence id 11" in fenced.absent
    (resent,) = new.publish([_request("resent", 11)], _now)
    assert resent.outcome == Outcome.UNKNOWN and "duplicate" in resent.evidence
    (later,) = new.publish([_request("later", 12)], _now)
    assert later.outcome == Outcome.PUBLISHED
    new.close()
    endpoint.delete_topic(topic, partitioned=False)


@pytest.mark.timeout(60)
def test_without_deduplication_absence_proves_nothing(pulsar_service: PulsarService) -> None:
    """On a topic without deduplication the fence refuses, saying so."""
    endpoint = pulsar_service.require()
    topic = deduplicated_topic(endpoint.admin_url, dedup=False)
    new = DeduplicatedPulsarDestination("dd", endpoint.service_url, topic,
                                        admin_url=endpoint.admin_url)
    with pytest.raises(NotFenced, match="deduplication is off"):
        new.fence(SHARD, {"a": "mac-a"}, 0)
    new.close()
    endpoint.delete_topic(topic, partitioned=False)
