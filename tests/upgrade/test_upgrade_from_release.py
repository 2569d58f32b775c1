"""The current build on a home written by release 0.1.0, built from this repository's
history (``docs/releases.toml``, ``release_build.py``): every message keeps its state,
replay from empty and from the release's checkpoints gives the live digest, and work
continues. Shard Logs in files (the release wrote every record kind, ``old_home.py``) and
on Kafka."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import run_nereus
from tests.integration.kafka_service import kafka_service  # noqa: F401  (the kafka param's)
from tests.upgrade.old_home import (
    BROKEN,
    CANCELLED,
    EXPIRED,
    PENDING,
    RESOLVED,
    UNCERTAIN,
    OldHome,
    cli,
    states,
    write_old_home,
)
from tests.upgrade.release_build import ReleaseBuild, build_release, release

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def release_0_1_0(tmp_path_factory: pytest.TempPathFactory) -> ReleaseBuild:
    """Release 0.1.0, built from its commit."""
    started = time.monotonic()
    build = build_release(release("0.1.0"), tmp_path_factory.mktemp("release-0.1.0"))
    print(f"built 0.1.0 in {time.monotonic() - started:.1f} s")
    return build


@pytest.fixture(scope="module", params=["file", pytest.param("kafka", marks=pytest.mark.kafka)])
def old_home(request: pytest.FixtureRequest, release_0_1_0: ReleaseBuild,
             tmp_path_factory: pytest.TempPathFactory) -> OldHome:
    """A home 0.1.0 wrote, its engine stopped: Shard Logs in files, or on Kafka."""
    kafka = None
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_service").require()
    work = tmp_path_factory.mktemp(f"home-{request.param}")
    started = time.monotonic()
    old = write_old_home(release_0_1_0, work / "home", work, kafka=kafka)
    print(f"0.1.0 wrote its {request.param} home in {time.monotonic() - started:.1f} s")
    return old


def test_the_current_build_reads_the_release_home_as_the_release_left_it(
        old_home: OldHome) -> None:
    """Offline, before anything runs: the current build computes the same digest of every
    shard as the release did, from the release's own database files."""
    for shard in old_home.shards:
        assert cli(None, old_home.home, "shard", "digest", shard)["digest"] == \
            old_home.digests[shard], shard


def test_upgrade_check_on_the_release_home(old_home: OldHome) -> None:
    """`nereus upgrade check` on the 0.1.0 home, offline: every shard's key schema is this
    build's (nothing to migrate), the home is at feature level 1, and the build may run it."""
    check = cli(None, old_home.home, "upgrade", "check")
    assert check["ok"] is True and check["refusals"] == [] and check["home_level"] == 1
    assert [(s["shard"], s["schema_version"], s["verdict"]) for s in check["shards"]] == \
        [(shard, 1, "CURRENT") for shard in old_home.shards]
    assert [(c["current"], c["older"]) for c in check["checkpoints"]] == [(1, 0), (1, 0)]


def test_the_release_wrote_every_record_kind(old_home: OldHome) -> None:
    """The home holds every record kind 0.1.0 writes, so the rest reads them all (on
    Kafka: all but ATTEMPT_RESOLVE, whose dead owner is made on file logs only)."""
    from nereus.records import ALL_KINDS

    kinds: set[str] = set()
    for shard in old_home.shards:
        log = run_nereus("--json", "shard", "log", shard, home=old_home.home)
        assert log.code == 0, log.stderr
        kinds |= {json.loads(line)["kind"] for line in log.stdout.splitlines()}
    file_only = set() if UNCERTAIN in old_home.states else {"ATTEMPT_RESOLVE"}
    assert set(ALL_KINDS) - kinds == file_only


def test_every_message_keeps_its_state_and_work_continues(old_home: OldHome) -> None:
    """Started on the release's home: every message (PUBLISHED, CANCELLED, SCHEDULED with
    inline, large and ordered payloads, FAILED by a break, EXPIRED, UNCERTAIN, published
    after an ATTEMPT_RESOLVE) is as the release left it; a new message is published;
    replay from empty and from each of the release's checkpoints gives the live digest."""
    home = old_home.home
    cli(None, home, "engine", "start", "--timeout", "30")
    try:
        now = states(None, home)
        assert now == old_home.states
        assert {now[i] for i in PENDING} == {"SCHEDULED"}
        assert {now[i] for i in CANCELLED} == {"CANCELLED"}
        assert (now[BROKEN], now[EXPIRED]) == ("FAILED", "EXPIRED")
        if UNCERTAIN in old_home.states:  # file logs
            assert (now[UNCERTAIN], now[RESOLVED]) == ("UNCERTAIN", "PUBLISHED")
        cli(None, home, "message", "schedule", "--lane", "local", "--delay", "0s",
            "--payload", "after the upgrade", "--id", "new-0", "--wait")
        from tests.polling import wait_until

        wait_until("the new build to publish a new message",
                   lambda: states(None, home).get("new-0") == "PUBLISHED", 30,
                   seen=lambda: states(None, home).get("new-0"))
    finally:
        cli(None, home, "engine", "stop", "--timeout", "20")
    for shard in old_home.shards:
        empty = cli(None, home, "shard", "replay", shard, "--empty", "--compare", "live")
        assert empty["match"] is True, empty
        checkpoint = old_home.checkpoints[shard]
        restored = cli(None, home, "shard", "replay", shard, "--from-checkpoint", checkpoint,
                       "--compare", "live")
        assert restored["match"] is True, restored
