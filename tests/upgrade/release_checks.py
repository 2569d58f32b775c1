"""The checks of the current build on a home release 0.1.0 wrote (``old_home.py``), shared
by ``test_upgrade_from_release.py`` (file Shard Logs) and ``..._kafka.py`` (Kafka), each of
which gives the ``old_home`` fixture; two modules, so a parallel run takes them at once.
No test changes the release's home: the one that starts an engine works on a copy."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import run_nereus
from tests.polling import wait_until
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
    stopped,
    write_old_home,
)
from tests.upgrade.release_build import ReleaseBuild, build_release, release


@pytest.fixture(scope="module")
def release_0_1_0(tmp_path_factory: pytest.TempPathFactory) -> ReleaseBuild:
    """Release 0.1.0, built from its commit."""
    started = time.monotonic()
    build = build_release(release("0.1.0"), tmp_path_factory.mktemp("release-0.1.0"))
    print(f"built 0.1.0 in {time.monotonic() - started:.1f} s")
    return build


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


def test_the_release_wrote_every_record_kind(old_home: OldHome,
                                            release_0_1_0: ReleaseBuild) -> None:
    """The home holds every record kind 0.1.0 knows (as the release itself lists them),
    so the rest reads them all (on Kafka: all but ATTEMPT_RESOLVE, whose dead owner is
    made on file logs only)."""
    listed = subprocess.run(
        [str(release_0_1_0.python), "-c", "import json; from nereus.records import ALL_KINDS; "
         "print(json.dumps(list(ALL_KINDS)))"], cwd=release_0_1_0.tree, capture_output=True,
        text=True, check=True, timeout=60)
    release_kinds = set(json.loads(listed.stdout))
    assert len(release_kinds) == 23, release_kinds
    kinds: set[str] = set()
    for shard in old_home.shards:
        log = run_nereus("--json", "shard", "log", shard, home=old_home.home)
        assert log.code == 0, log.stderr
        kinds |= {json.loads(line)["kind"] for line in log.stdout.splitlines()}
    file_only = set() if UNCERTAIN in old_home.states else {"ATTEMPT_RESOLVE"}
    assert release_kinds - kinds == file_only


def test_every_message_keeps_its_state_and_work_continues(old_home: OldHome,
                                                          tmp_path: Path) -> None:
    """Started on (a copy of) the release's home: every message (PUBLISHED, CANCELLED,
    SCHEDULED with inline, large and ordered payloads, FAILED by a break, EXPIRED,
    UNCERTAIN, published after an ATTEMPT_RESOLVE) is as the release left it; a new message
    is published; replay from empty and from each of the release's checkpoints gives the
    live digest. (A copy: the module's other tests read the home as 0.1.0 left it, in
    whatever order they run.)"""
    home = tmp_path / "home"
    shutil.copytree(old_home.home, home, symlinks=True)
    with stopped(None, home):
        cli(None, home, "engine", "start", "--timeout", "30")
        now = states(None, home)
        assert now == old_home.states
        assert {now[i] for i in PENDING} == {"SCHEDULED"}
        assert {now[i] for i in CANCELLED} == {"CANCELLED"}
        assert (now[BROKEN], now[EXPIRED]) == ("FAILED", "EXPIRED")
        if UNCERTAIN in old_home.states:  # file logs
            assert (now[UNCERTAIN], now[RESOLVED]) == ("UNCERTAIN", "PUBLISHED")
        cli(None, home, "message", "schedule", "--lane", "local", "--delay", "0s",
            "--payload", "after the upgrade", "--id", "new-0", "--wait")
        wait_until("the new build to publish a new message",
                   lambda: states(None, home).get("new-0") == "PUBLISHED", 30,
                   seen=lambda: states(None, home).get("new-0"))
    for shard in old_home.shards:
        empty = cli(None, home, "shard", "replay", shard, "--empty", "--compare", "live")
        assert empty["match"] is True, empty
        checkpoint = old_home.checkpoints[shard]
        restored = cli(None, home, "shard", "replay", shard, "--from-checkpoint", checkpoint,
                       "--compare", "live")
        assert restored["match"] is True, restored


def written(build: ReleaseBuild, tmp_path_factory: pytest.TempPathFactory, log: str,
            kafka: str | None = None) -> OldHome:
    """The home ``build`` wrote, its Shard Logs in files or (``kafka``) on Kafka."""
    work = tmp_path_factory.mktemp(f"home-{log}")
    started = time.monotonic()
    old = write_old_home(build, work / "home", work, kafka=kafka)
    print(f"0.1.0 wrote its {log} home in {time.monotonic() - started:.1f} s")
    return old
