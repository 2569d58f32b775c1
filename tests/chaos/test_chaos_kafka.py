"""Small chaos runs with the Command Topic and the destinations on Kafka (lane ``p2`` stays
a file): the engine killed, destinations faulted, and the broker itself stopped and
started; every invariant holds (``tests/chaos/small_runs.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.homes import Brokers
from tests.chaos.small_runs import assert_clean, small_run
from tests.integration.kafka_service import KafkaService, kafka_restored, kafka_service

__all__ = ["kafka_service"]  # the session fixture, used by name below

pytestmark = pytest.mark.timeout(180)


def test_sigkill_on_kafka_loses_nothing_and_replays_alike(
        tmp_path: Path, kafka_service: KafkaService) -> None:
    """SIGKILL and restart with the Shard Log on a Command Topic: acknowledged commands
    applied once in order, nothing early or twice, replays give the live digest."""
    brokers = Brokers(kafka=kafka_service.require())
    assert_clean(small_run(tmp_path, "kafka", "sigkill", brokers=brokers, replay=True))


def test_kafka_destination_faults_keep_every_invariant(
        tmp_path: Path, kafka_service: KafkaService) -> None:
    """Kafka lanes that refuse and that lose their answer after the produce: UNKNOWN
    attempts are settled by the evidence scan; order and the healthy lane's lateness hold."""
    brokers = Brokers(kafka=kafka_service.require())
    assert_clean(small_run(tmp_path, "kafka", "refuse", "fail-after-write", brokers=brokers,
                           lateness_bound_ms=3_000, operator=False))


@pytest.mark.serial
@pytest.mark.timeout(400)
def test_the_kafka_broker_stopped_and_started_mid_run(
        tmp_path: Path, kafka_service: KafkaService) -> None:
    """``scripts/services down kafka`` then ``up`` while the workload runs: the Command
    Topic and the destinations go away together and come back; nothing acknowledged is
    lost, nothing is published twice or early."""
    brokers = Brokers(kafka=kafka_service.require())
    with kafka_restored():
        report = small_run(tmp_path, "kafka", "kafka-outage", brokers=brokers,
                           hold_s=(3.0, 5.0), duration_s=8.0)
    assert_clean(report)
