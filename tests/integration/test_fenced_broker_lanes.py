"""kill -9 of an engine publishing to a Kafka or Pulsar lane with ``fencing = true``: the
next owner's recovery settles every attempt that was in flight, none left UNCERTAIN.

The engine runs in a child process (``outbox_crash_worker.py``) whose lane sends half of
its first publish through the adapter and then hangs, so attempts are in flight by
construction when it is SIGKILLed; the test's own engine then recovers the home against
the real brokers (``scripts/services up kafka|pulsar``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.integration.engine_harness import in_process_engine
from tests.integration.kafka_service import kafka_bootstrap, kafka_service
from tests.integration.pulsar_service import PulsarService, pulsar_service
from tests.integration.test_fenced_outbox import crash, settled_exactly
from tests.integration.test_fenced_pulsar import deduplicated_topic

__all__ = ["kafka_bootstrap", "kafka_service", "pulsar_service"]  # fixtures


def _recovered(home: Path, lane: str, count: int, kind: str) -> None:
    sent = crash(home, count, lane)
    assert 0 < sent < count
    with in_process_engine(home, partitions=1, lanes=lane) as h:
        store = h.engine.shards[next(iter(h.engine.shards))].store
        settled_exactly(store, count, sent, kind)


@pytest.mark.timeout(180)
def test_a_kafka_lane_with_fencing_leaves_nothing_uncertain(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """Kafka, transactional per shard: the committed half PUBLISHED, the unsent half
    NOT_PUBLISHED with 'fenced absence (kafka transaction)' evidence."""
    lane = (f'[lanes.local]\ndestination = "kafka"\ntopic = "nereus-kill-{uuid.uuid4().hex[:8]}"'
            f'\nbootstrap = "{kafka_bootstrap}"\nfencing = true\n')
    _recovered(tmp_path / "home", lane, 12, "kafka transaction")


@pytest.mark.timeout(180)
def test_a_pulsar_lane_with_fencing_leaves_nothing_uncertain(
        tmp_path: Path, pulsar_service: PulsarService) -> None:
    """Pulsar, deduplicated, a producer per shard: the stored half PUBLISHED, the unsent
    half NOT_PUBLISHED with 'fenced absence (pulsar deduplication)' evidence."""
    endpoint = pulsar_service.require()
    topic = deduplicated_topic(endpoint.admin_url)
    lane = (f'[lanes.local]\ndestination = "pulsar"\ntopic = "{topic}"\nservice_url = '
            f'"{endpoint.service_url}"\nadmin_url = "{endpoint.admin_url}"\nfencing = true\n')
    _recovered(tmp_path / "home", lane, 12, "pulsar deduplication")
    endpoint.delete_topic(topic, partitioned=False)
