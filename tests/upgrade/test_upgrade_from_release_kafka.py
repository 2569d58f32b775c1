"""The upgrade from 0.1.0 of ``test_upgrade_from_release.py``, the Shard Logs on Kafka."""

from __future__ import annotations

import pytest

from tests.integration.kafka_service import KafkaService, kafka_service
from tests.upgrade.old_home import OldHome
from tests.upgrade.release_build import ReleaseBuild
from tests.upgrade.release_checks import (
    release_0_1_0,
    test_every_message_keeps_its_state_and_work_continues,
    test_the_current_build_reads_the_release_home_as_the_release_left_it,
    test_the_release_wrote_every_record_kind,
    test_upgrade_check_on_the_release_home,
    written,
)

__all__ = [  # the fixtures and tests pytest collects here
    "kafka_service",
    "release_0_1_0",
    "test_every_message_keeps_its_state_and_work_continues",
    "test_the_current_build_reads_the_release_home_as_the_release_left_it",
    "test_the_release_wrote_every_record_kind",
    "test_upgrade_check_on_the_release_home",
]

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def old_home(release_0_1_0: ReleaseBuild, tmp_path_factory: pytest.TempPathFactory,
             kafka_service: KafkaService) -> OldHome:
    """A home 0.1.0 wrote on Kafka Shard Logs, its engine stopped."""
    return written(release_0_1_0, tmp_path_factory, "kafka", kafka_service.require())
