"""The current build on a home written by release 0.1.0 with file Shard Logs, built from
this repository's history (``docs/releases.toml``, ``release_build.py``): every message
keeps its state, replay from empty and from the release's checkpoints gives the live
digest, and work continues; the release wrote every record kind (``old_home.py``). The
checks: ``release_checks.py``; on Kafka: ``test_upgrade_from_release_kafka.py``."""

from __future__ import annotations

import pytest

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
    "release_0_1_0",
    "test_every_message_keeps_its_state_and_work_continues",
    "test_the_current_build_reads_the_release_home_as_the_release_left_it",
    "test_the_release_wrote_every_record_kind",
    "test_upgrade_check_on_the_release_home",
]

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def old_home(release_0_1_0: ReleaseBuild, tmp_path_factory: pytest.TempPathFactory) -> OldHome:
    """A home 0.1.0 wrote on file Shard Logs, its engine stopped."""
    return written(release_0_1_0, tmp_path_factory, "file")
