"""``nereus payload gc``: expired reservations and stage-less objects are collected,
committed payloads and live reservations kept, and nothing below the Recovery Floor is ever
deleted, even when no live state or log mentions it any more; a shard whose log no longer
holds the records after its state is refused, never judged."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.records import QueryBarrier, encode
from nereus.shard import ShardId
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.homelog import home_log
from tests.integration.large_payload_homes import (
    gc,
    keys_of,
    payload_file,
    reserve_directly,
    schedule_file,
    small_inline_home,
)


def test_gc_collects_an_expired_reservation_and_keeps_the_rest(tmp_path: Path) -> None:
    """Expired reservation and a stage-less object: collected. Committed payload and a live
    reservation: kept. Without a TTY and without --yes nothing is deleted (exit 2)."""
    home = small_inline_home(tmp_path)
    committed = schedule_file(home, payload_file(tmp_path)).json()["payload_object"]
    now = time.time_ns() // 1_000_000
    expired = reserve_directly(home, delay_message_id="gone", expires_at_ms=now - 7_200_000,
                               data=b"abandoned" * 100)
    live = reserve_directly(home, delay_message_id="uploading", expires_at_ms=now + 3_600_000,
                            data=b"in progress" * 100)
    stray = "payloads/default/1/no-stage-anywhere"
    LocalObjectStore(home / "objects").put_bytes(stray, b"stray")

    refused = gc(home)
    assert refused.code == 2 and "--yes" in refused.stdout
    assert (home / "objects" / expired).exists()

    dry = gc(home, "--dry-run")
    assert dry.code == 0, dry.stderr
    report = dry.json()
    assert report["dry_run"] is True
    assert keys_of(report["deleted"]) == {expired, stray}
    assert keys_of(report["kept"]) == {committed, live}
    assert (home / "objects" / expired).exists()

    done = gc(home, "--yes")
    assert done.code == 0, done.stderr
    assert keys_of(done.json()["deleted"]) == {expired, stray}
    assert not (home / "objects" / expired).exists()
    assert not (home / "objects" / stray).exists()
    assert (home / "objects" / committed).exists() and (home / "objects" / live).exists()

    for key in (committed, live):
        explicit = gc(home, "--key", key, "--yes")
        assert explicit.code == 1, explicit.stderr
        assert "refusing" in explicit.stdout
    assert gc(home, "--key", "checkpoints/anything", "--yes").code == 2
    assert gc(home, "--key", "payloads/default/0/nothing-here", "--yes").code == 3


def test_gc_reads_applied_state_beside_the_engine(tmp_path: Path) -> None:
    """With the engine running (state applied, opened read-only by gc) the verdicts hold."""
    home = small_inline_home(tmp_path)
    now = time.time_ns() // 1_000_000
    expired = reserve_directly(home, delay_message_id="gone", expires_at_ms=now - 7_200_000,
                               data=b"abandoned" * 100)
    with running_engine(home):
        receipt = schedule_file(home, payload_file(tmp_path), "--wait").json()
        assert receipt["result"] == "APPLIED"
        report = gc(home, "--yes").json()
    assert keys_of(report["deleted"]) == {expired}
    assert keys_of(report["kept"]) == {receipt["payload_object"]}
    assert "COMMITTED" in report["kept"][0]["reason"]


def test_gc_never_deletes_below_the_recovery_floor(tmp_path: Path) -> None:
    """An object a Recovery Set member references is kept, and deleting it explicitly is
    refused (exit 1), even when no live state or log mentions it any more."""
    home = small_inline_home(tmp_path)
    with running_engine(home):
        receipt = schedule_file(home, payload_file(tmp_path), "--wait").json()
    key, shard = receipt["payload_object"], receipt["shard"]
    made = run_nereus("--json", "checkpoint", "create", shard, home=home)
    assert made.code == 0, made.stderr

    refused = gc(home, "--key", key, "--yes")
    assert refused.code == 1
    assert "Recovery Set" in refused.stdout and key in refused.stdout

    # lose the live state and the log: only the checkpoint still needs the object
    shutil.rmtree(home / "state")
    shutil.rmtree(home / "shardlog")
    report = gc(home, "--yes")
    assert report.code == 0, report.stderr
    assert report.json()["deleted"] == []
    [kept] = report.json()["kept"]
    assert kept["key"] == key and "Recovery Floor" in kept["reason"]
    again = gc(home, "--key", key, "--yes")
    assert again.code == 1 and "Recovery Set" in again.stdout
    assert (home / "objects" / key).exists()


def test_gc_refuses_a_shard_whose_log_starts_after_its_state(tmp_path: Path) -> None:
    """default/0 has no live state and its log was pruned past position 0: the records
    between could hold a commit, so gc refuses (exit 2) naming the shard and where its log
    starts, and deletes nothing, not even an object no stage mentions."""
    home = small_inline_home(tmp_path)
    shard = ShardId("default", 0)
    log = home_log(home, shard, segment_bytes=256)
    try:
        for n in range(12):
            log.append([encode(QueryBarrier(command_id=f"q{n}"))])
        log.delete_before(8)
        start = log.start_position()
    finally:
        log.close()
    assert start > 0
    stray = "payloads/default/1/no-stage-anywhere"
    LocalObjectStore(home / "objects").put_bytes(stray, b"stray")

    refused = gc(home, "--yes")
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json()["error"]
    assert "default/0" in error and f"starts at position {start}" in error, error
    assert (home / "objects" / stray).exists()
