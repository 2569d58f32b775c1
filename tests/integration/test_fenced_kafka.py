"""A Kafka lane with ``fencing = true``: one transactional producer per shard owner, so the
next owner's fence makes absence proof (``adapters/backends/kafka/kafka_transactions.py``).

Two destination objects stand for the old and the new owner of one shard, against the
broker of ``scripts/services up kafka``. The old one commits one batch, then begins a
transaction, sends a record and dies before its commit (its producer is simply never used
again): the new owner's fence finds the committed record, proves the sent-but-uncommitted
one and one never sent absent, and the old producer can commit nothing any more.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException

from nereus.adapters.backends.destination.fencing import FENCED_ABSENCE
from nereus.adapters.backends.destination.protocol import PublishRequest
from nereus.adapters.backends.kafka.kafka_destination import KafkaDestination
from nereus.adapters.backends.kafka.kafka_transactions import TransactionalKafkaDestination
from nereus.publish import PublishTemplate
from nereus.records import Outcome
from tests.integration.kafka_service import kafka_bootstrap, kafka_service
from tests.integration.kafka_topic import create_topic

__all__ = ["kafka_bootstrap", "kafka_service"]  # fixtures, imported so pytest finds them

SHARD = "default/0"


def _request(attempt: str) -> PublishRequest:
    template = PublishTemplate(delay_message_id=f"m-{attempt}", generation=1, lane="tx",
                               deliver_at_ms=0, action_at_ms=0, key="k", headers={},
                               payload=b"payload")
    return PublishRequest(attempt, template, f"mac-{attempt}", shard=SHARD)


def _now() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.timeout(120)
def test_the_next_owner_fences_the_old_transaction_and_proves_absence(
        kafka_bootstrap: str) -> None:
    """Committed: PUBLISHED by the fence (and by the read_committed evidence scan); sent in
    the dead owner's open transaction, or never sent: absent with 'fenced absence (kafka
    transaction)' evidence, though a read_uncommitted scan does see the uncommitted one;
    the old producer's commit then fails (fenced)."""
    topic = f"nereus-fenced-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    since = _now() - 60_000
    old = TransactionalKafkaDestination("tx", kafka_bootstrap, topic, timeout_s=15)
    (done,) = old.publish([_request("committed")], _now)
    assert done.outcome == Outcome.PUBLISHED and done.evidence.startswith(f"kafka:{topic}/")
    producer = old._owner(SHARD)  # the owner dies inside its next transaction
    producer.begin_transaction()
    assert old._produce(producer, _request("in-flight"), 0, {}) is None
    producer.flush(15)
    plain = KafkaDestination("plain", kafka_bootstrap, topic, timeout_s=15)
    assert "in-flight" in plain.scan_evidence({"in-flight": "mac-in-flight"}, since, _now())

    new = TransactionalKafkaDestination("tx", kafka_bootstrap, topic, timeout_s=15)
    wanted = {a: f"mac-{a}" for a in ("committed", "in-flight", "never-sent")}
    fenced = new.fence(SHARD, wanted, since)
    assert set(fenced.found) == {"committed"}
    assert fenced.absent.startswith(f"{FENCED_ABSENCE} (kafka transaction): ")
    assert new.scan_evidence(wanted, since, _now()) == {"committed": fenced.found["committed"]}
    with pytest.raises(KafkaException):
        producer.commit_transaction(15)
    (after,) = new.publish([_request("next")], _now)
    assert after.outcome == Outcome.PUBLISHED
    for destination in (old, new, plain):
        destination.close()
