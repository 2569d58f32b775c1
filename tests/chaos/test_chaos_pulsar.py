"""Small chaos runs with the Command Topic and the destinations on Pulsar (lane ``p2`` stays
a file): the engine killed and destinations faulted; every invariant holds
(``tests/chaos/small_runs.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.homes import Brokers
from tests.chaos.small_runs import assert_clean, small_run
from tests.integration.pulsar_service import PulsarService, pulsar_service

__all__ = ["pulsar_service"]  # the session fixture, used by name below

pytestmark = pytest.mark.timeout(180)


def _brokers(service: PulsarService) -> Brokers:
    endpoint = service.require()
    return Brokers(pulsar_url=endpoint.service_url, pulsar_admin=endpoint.admin_url)


def test_sigkill_on_pulsar_loses_nothing_and_replays_alike(
        tmp_path: Path, pulsar_service: PulsarService) -> None:
    """SIGKILL and restart with the Shard Log on a Pulsar Command Topic: acknowledged
    commands applied once in order, nothing early or twice, replays give the live digest."""
    assert_clean(small_run(tmp_path, "pulsar", "sigkill", brokers=_brokers(pulsar_service),
                           replay=True))


def test_pulsar_destination_faults_keep_every_invariant(
        tmp_path: Path, pulsar_service: PulsarService) -> None:
    """Pulsar lanes that refuse, hang and lose their answer after the send: UNKNOWN attempts
    are settled by the evidence scan; order and the healthy lane's lateness hold."""
    assert_clean(small_run(tmp_path, "pulsar", "refuse", "hang", "fail-after-write",
                           brokers=_brokers(pulsar_service), lateness_bound_ms=3_000,
                           operator=False))
