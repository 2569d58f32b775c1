"""A small chaos run on a cluster (``tests/chaos/cluster_runner.py``): three nodes on this
host sharing four shards through etcd, the Command Topic and every lane on Kafka, one node
SIGKILLed and started again in its home while the workload runs; every invariant holds
over the history, across the nodes that owned each shard (``tests/chaos/small_runs.py``).
``bench/chaos.py --backend cluster`` runs every node nemesis, longer.

``serial``: three nodes against a 4 s session TTL (the failover tests' reason)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.homes import Brokers
from tests.chaos.small_runs import assert_clean, small_run
from tests.integration.etcd_service import EtcdService, etcd_service
from tests.integration.kafka_service import KafkaService, kafka_service

__all__ = ["etcd_service", "kafka_service"]  # the session fixtures, used by name below

pytestmark = [pytest.mark.serial, pytest.mark.kafka, pytest.mark.etcd,
              pytest.mark.timeout(150)]


def test_a_node_sigkilled_and_started_again_loses_nothing(
        tmp_path: Path, kafka_service: KafkaService, etcd_service: EtcdService) -> None:
    """SIGKILL of one node, then ``start`` in its home at once (it waits out its previous
    run's session, then joins): acknowledged commands applied once in source order by
    whichever node owned the shard, nothing early, no attempt published twice across
    owners, ORDERED keys in order across the handover, every engine start answered."""
    etcd_service.require()
    brokers = Brokers(kafka=kafka_service.require())
    assert_clean(small_run(tmp_path, "cluster", "sigkill", brokers=brokers, ops=24,
                           duration_s=3.0, hold_s=(0.5, 1.0), operator=False))
