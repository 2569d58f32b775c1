"""Small chaos runs on the embedded default (file Shard Log, file destinations): each
nemesis injected and healed while the seeded workload runs, and every invariant of
``tests/chaos/checker.py`` holds over the history (``tests/chaos/small_runs.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.homes import Brokers
from tests.chaos.small_runs import assert_clean, small_run
from tests.integration.services import S3Service, run_services, s3_service

__all__ = ["s3_service"]  # the session fixture, used by name below

pytestmark = pytest.mark.timeout(150)


def test_sigkill_of_the_engine_loses_nothing_and_replays_alike(tmp_path: Path) -> None:
    """SIGKILL and restart, again and again: every acknowledged command applied once, in
    order; nothing early, nothing published twice; replay from empty and from every
    checkpoint gives the live digest. The home is at feature level 2, so admissions and
    outcomes travel as PUBLISH_BATCH records (every other chaos run writes level 1's)."""
    assert_clean(small_run(tmp_path, "file", "sigkill", replay=True, feature_level=2))


def test_sigstop_and_graceful_restarts_keep_every_invariant(tmp_path: Path) -> None:
    """SIGSTOP / SIGCONT (the engine frozen holding its lock, claims and socket) and
    ``engine stop`` / start in turn."""
    assert_clean(small_run(tmp_path, "file", "sigstop", "restart"))


def test_destination_faults_keep_every_invariant(tmp_path: Path) -> None:
    """Destinations that refuse, hang holding their permits, and lose their answer after
    the write, in turn on the plain and ORDERED lanes: order, classification (an answer
    lost after the write is UNKNOWN and settled by evidence, never NOT_PUBLISHED) and the
    healthy lane's lateness hold."""
    assert_clean(small_run(tmp_path, "file", "refuse", "hang", "fail-after-write",
                           lateness_bound_ms=3_000, operator=False))


def test_a_file_lane_whose_path_is_a_directory_or_a_fifo(tmp_path: Path) -> None:
    """No hook at all: the outbox path replaced by a directory (every open fails) or a FIFO
    (opens hang, bytes written into it are gone: those attempts stay UNCERTAIN), and the
    engine restarted while the FIFO is there: it answers at once (issue 37 break 3)."""
    assert_clean(small_run(tmp_path, "file", "dir-fault", "fifo-fault", "fifo-fault+restart",
                           duration_s=8.0))


def test_clock_steps_inside_and_beyond_the_bound_publish_nothing_early(
        tmp_path: Path) -> None:
    """The engine's wall clock stepped +0.8 s, +3 s, -0.6 s, -2 s while it runs: no consumer
    reads a message before its deliverAt by the true clock (no slack allowed)."""
    assert_clean(small_run(tmp_path, "file", "clock-step"))


def test_restore_from_a_checkpoint_mid_run(tmp_path: Path) -> None:
    """``checkpoint create``, SIGKILL, the shard's database lost, ``checkpoint restore``
    into its place, start: the rest of the log replayed; nothing lost or doubled, digests
    alike."""
    assert_clean(small_run(tmp_path, "file", "checkpoint-restore", replay=True))


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting the home's tmpfs needs root")
def test_a_full_disk_under_the_home(tmp_path: Path) -> None:
    """The home on a small tmpfs filled by a ballast file, then freed: commands refused
    while it is full are the client's to retry; nothing acknowledged is lost."""
    assert_clean(small_run(tmp_path, "file", "full-disk"))


def test_worker_processes_killed_and_stopped(tmp_path: Path) -> None:
    """``engine start --workers 2``: one worker SIGKILLed (the front door starts it again)
    or SIGSTOPped and continued."""
    assert_clean(small_run(tmp_path, "file", "worker-kill", "worker-stop"))


@pytest.mark.serial
@pytest.mark.timeout(400)
def test_the_object_store_stopped_and_started_mid_run(tmp_path: Path,
                                                      s3_service: S3Service) -> None:
    """Checkpoints and large payloads in S3, and S3 stopped and started while the workload
    runs (``scripts/services down|up s3``): a large payload's upload fails at the client,
    a due one's materialization fails at Claim and is retried; nothing acknowledged is
    lost or published twice, and every replay gives the live digest."""
    brokers = Brokers(s3=s3_service.require())
    try:
        report = small_run(tmp_path, "file", "s3-outage", brokers=brokers, replay=True,
                           hold_s=(3.0, 5.0), duration_s=8.0)
    finally:
        if run_services("status", "s3", timeout=30).returncode != 0:
            run_services("up", "s3", timeout=600)
    assert_clean(report)
