"""A rolling upgrade from 0.1.0 with traffic (``rolling.py``), short: three nodes on etcd
and Kafka replaced one at a time while the chaos workload runs, both builds live side by
side, then ``upgrade finalize``; the history checker finds nothing, and nodes below the
raised level are refused. ``bench/rolling_upgrade.py`` runs it for minutes.

``serial``: three nodes against a 4 s session TTL (the chaos cluster's reason)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus import __version__
from nereus.features import SUPPORTED_LEVEL, TEST_LEVEL
from tests.chaos.homes import Brokers
from tests.integration.etcd_service import EtcdService, etcd_service
from tests.integration.kafka_service import KafkaService, kafka_service
from tests.upgrade.release_build import build_release, release
from tests.upgrade.rolling import rolling_upgrade

__all__ = ["etcd_service", "kafka_service"]  # the session fixtures, used by name below

pytestmark = [pytest.mark.serial, pytest.mark.kafka, pytest.mark.etcd,
              pytest.mark.timeout(280)]


def test_a_rolling_upgrade_under_traffic_loses_nothing(
        tmp_path: Path, kafka_service: KafkaService, etcd_service: EtcdService) -> None:
    """0.1.0 nodes replaced by the current build one at a time under the workload:
    acknowledged commands applied once, nothing early, no attempt published twice,
    ORDERED keys in order, every shard ACTIVE at the end and replay digests equal; the
    level is raised (to the test-only level the new nodes claim) once all three run the
    current build, after which a 0.1.0 node and a node of the current build that claims
    only its supported level are refused."""
    etcd_service.require()
    brokers = Brokers(kafka=kafka_service.require())
    build = build_release(release("0.1.0"), tmp_path / "release")
    report, upgrade = rolling_upgrade(tmp_path / "run", brokers, build, seed=42, ops=40,
                                      duration_s=30.0, mixed_s=2.0)
    mixed_s = ((upgrade.mixed_ended_ms or 0) - (upgrade.mixed_started_ms or 0)) / 1000
    print(report.summary(), f"mixed builds {mixed_s:.1f} s", upgrade.refusals)
    assert upgrade.done and report.faults >= 1, report.summary()
    assert report.operations >= 20 and report.seen > 0 and report.quiesced, report.summary()
    assert report.violations == [], report.summary()
    assert upgrade.refusals["finalize"] == "RAISED", upgrade.refusals
    assert "unknown table [features]" in upgrade.refusals["0.1.0"], upgrade.refusals
    assert f"runs build {__version__}, which supports feature level {SUPPORTED_LEVEL}; the " \
        f"cluster is at feature level {TEST_LEVEL}" in upgrade.refusals["level 1"], \
        upgrade.refusals
