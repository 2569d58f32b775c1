"""The embedded coordinator: the backend contract, and what only the SQLite file can show.

The contract runs on the system clock (expiry in real time, holders in other processes).
The exact instant of expiry, the bounded change log, reboots and a file that stays locked
are shown here, with a ``FakeClock`` where time is the point.
"""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.coordination.sqlite import SqliteCoordinator
from nereus.coordination import (
    CoordinatorUnavailable,
    KeyNotFound,
    NotificationsLost,
    NotificationType,
    SessionExpired,
    prefix_range,
)
from tests.fake_clock import FakeClock
from tests.integration.coordinator_child import ChildOpener
from tests.integration.coordinator_contract import CoordinatorContract, collect_until

TTL_MS = 1_000


def open_sqlite(path: str) -> SqliteCoordinator:
    """The child processes' opener (``ChildOpener``): the coordinator file at ``path``."""
    return SqliteCoordinator(Path(path))


class TestSqliteCoordinator(CoordinatorContract):
    """The embedded coordinator keeps every promise of the Coordinator contract."""

    def make_coordinator(self, tmp_path: Path) -> SqliteCoordinator:
        return open_sqlite(str(tmp_path / "coordinator.db"))

    def child_opener(self, tmp_path: Path) -> ChildOpener:
        return ChildOpener(f"{__name__}:open_sqlite", str(tmp_path / "coordinator.db"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_timed(tmp_path: Path, clock: FakeClock) -> Iterator[SqliteCoordinator]:
    """A coordinator whose deadlines follow ``clock``; a session made with
    ``heartbeats_per_ttl=1`` beats only once its TTL has passed (a holder that went
    silent), so the store's own deadline is what the test sees."""
    with SqliteCoordinator(tmp_path / "coordinator.db", clock=clock,
                           heartbeats_per_ttl=1) as coordinator:
        yield coordinator


def gone(coordinator: SqliteCoordinator, key: str) -> bool:
    try:
        coordinator.get(key)
    except KeyNotFound:
        return key not in coordinator.list(*prefix_range(key))
    return False


# expiry on the store's clock --------------------------------------------------------------
def test_an_ephemeral_record_is_there_until_the_deadline_and_not_at_it(
        fake_timed: SqliteCoordinator, clock: FakeClock) -> None:
    """With no heartbeat after it was made, an ephemeral record is read by get, list and
    range_scan until 1 ms before its session's TTL ends, and by none of them at the
    deadline, before anything has deleted it."""
    session = fake_timed.create_session(TTL_MS, client_identity="node-1")
    fake_timed.put("nodes/1", b"x", ephemeral=session)
    clock.advance((TTL_MS - 1) / 1000)
    assert fake_timed.get("nodes/1").value == b"x"
    assert [r.key for r in fake_timed.range_scan(*prefix_range("nodes/"))] == ["nodes/1"]
    clock.advance(0.001)
    assert gone(fake_timed, "nodes/1")
    assert fake_timed.range_scan(*prefix_range("nodes/")) == []


def test_a_clock_jump_past_the_ttl_ends_a_heartbeating_session(
        tmp_path: Path, clock: FakeClock) -> None:
    """A holder that did not run for a whole TTL (the clock jumps past it in one step)
    loses its session even though its keep-alive thread is alive: the record is gone at
    once, the session finds itself lost, and every further use raises SessionExpired."""
    with SqliteCoordinator(tmp_path / "c.db", clock=clock) as coordinator:
        session = coordinator.create_session(TTL_MS, client_identity="node-1")
        coordinator.put("owner", b"node-1", ephemeral=session)
        clock.advance(TTL_MS / 1000)
        assert gone(coordinator, "owner")
        assert session.wait_lost(10.0)
        with pytest.raises(SessionExpired):
            session.keep_alive()
        with pytest.raises(SessionExpired):
            coordinator.put("owner", b"again", ephemeral=session)
        assert session.certain_until_ms() == 0


def test_heartbeats_keep_a_session_alive_as_the_clock_moves(
        tmp_path: Path, clock: FakeClock) -> None:
    """A session heartbeating three times per TTL survives the clock moving on in steps
    shorter than a beat, for many TTLs, and its certain deadline moves with it."""
    with SqliteCoordinator(tmp_path / "c.db", clock=clock) as coordinator:
        session = coordinator.create_session(TTL_MS, client_identity="node-1")
        coordinator.put("member", b"x", ephemeral=session)
        for _ in range(30):
            before = session.certain_until_ms()
            clock.advance(0.34)
            while session.certain_until_ms() == before:  # the beat this step woke up
                assert not session.wait_lost(0.005)
        assert not session.lost()
        assert coordinator.get("member").value == b"x"
        assert session.certain_until_ms() >= clock.monotonic_ms() + TTL_MS // 3


def test_reap_deletes_expired_records_and_notifies(
        fake_timed: SqliteCoordinator, clock: FakeClock) -> None:
    """reap (what the reaper thread and every write run) deletes an expired session's
    records with a KEY_DELETED each, and counts the sessions it ended."""
    session = fake_timed.create_session(TTL_MS, client_identity="node-1")
    fake_timed.put("nodes/1", b"x", ephemeral=session)
    fake_timed.put("nodes/2", b"x", ephemeral=session)
    notifications = fake_timed.get_notifications("nodes/")
    assert fake_timed.reap() == 0
    clock.advance(TTL_MS / 1000 + 0.001)
    fake_timed.reap()  # 1, or 0 if the session's own thread ended it first
    seen = [notifications.poll(5.0) for _ in range(2)]
    assert {(n.type, n.key) for n in seen if n is not None} == {
        (NotificationType.KEY_DELETED, "nodes/1"), (NotificationType.KEY_DELETED, "nodes/2")}
    assert fake_timed.reap() == 0


# the change log ---------------------------------------------------------------------------
def test_a_subscriber_behind_a_trimmed_change_log_is_told(tmp_path: Path) -> None:
    """With the change log bounded to 10 rows, a subscriber that reads as changes come
    sees all 40, and one that fell behind the trimming raises NotificationsLost instead
    of skipping the changes it missed."""
    with SqliteCoordinator(tmp_path / "c.db", max_changes=10) as coordinator:
        keeping_up = coordinator.get_notifications("k/")
        behind = coordinator.get_notifications("k/")
        seen = []
        for i in range(40):
            coordinator.put(f"k/{i:02d}", b"x")
            seen += collect_until(keeping_up, f"k/{i:02d}")
        assert [n.key for n in seen] == [f"k/{i:02d}" for i in range(40)]
        with pytest.raises(NotificationsLost):
            behind.poll(1.0)
        with pytest.raises(NotificationsLost):
            next(behind)


# the file ---------------------------------------------------------------------------------
def test_the_home_coordinator_is_a_private_wal_file(tmp_path: Path) -> None:
    """The embedded coordinator of a home is <home>/coordinator.db, 0600, in WAL mode."""
    home = tmp_path / "home"
    with SqliteCoordinator.in_home(home) as coordinator:
        coordinator.put("x", b"x")
        assert coordinator.path == home / "coordinator.db"
    assert stat.S_IMODE(coordinator.path.stat().st_mode) == 0o600
    with sqlite3.connect(coordinator.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_records_and_the_revision_survive_reopening(tmp_path: Path) -> None:
    """Durable records keep value and version across a reopen, and the next put's version
    continues above every earlier one."""
    with SqliteCoordinator(tmp_path / "c.db") as first:
        version = first.put("config", b"v1")
        first.put("other", b"x")
        first.delete("other")
    with SqliteCoordinator(tmp_path / "c.db") as again:
        assert again.get("config").version == version
        assert again.put("config", b"v2").version_id > version.version_id + 1


def test_a_reboot_ends_every_session_of_the_boot_before(tmp_path: Path) -> None:
    """Deadlines are on the host's monotonic clock: the first open under another boot id
    ends every session written under the old one (no holder survived the reboot), and
    leaves durable records."""
    with SqliteCoordinator(tmp_path / "c.db", boot_id="boot-1") as before:
        session = before.create_session(60_000, client_identity="node-1")
        before.put("member", b"x", ephemeral=session)
        before.put("config", b"kept")
        with SqliteCoordinator(tmp_path / "c.db", boot_id="boot-2") as after:
            assert after.list("", "~") == ["config"]
        with pytest.raises(SessionExpired):
            session.keep_alive()


def test_a_file_locked_too_long_is_reported_unavailable(tmp_path: Path) -> None:
    """A write that cannot take the file's write lock within the busy timeout raises
    CoordinatorUnavailable naming the file, and the coordinator works once it is free."""
    with SqliteCoordinator(tmp_path / "c.db", busy_timeout_s=0.2) as coordinator:
        blocker = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(CoordinatorUnavailable, match=r"c\.db"):
            coordinator.put("x", b"x")
        blocker.execute("ROLLBACK")
        blocker.close()
        assert coordinator.put("x", b"x").modifications_count == 0


def test_a_session_ttl_below_the_minimum_is_refused(tmp_path: Path) -> None:
    """A TTL too short to heartbeat within is refused before anything is written."""
    with SqliteCoordinator(tmp_path / "c.db") as coordinator, pytest.raises(ValueError):
        coordinator.create_session(1, client_identity="node-1")
