"""The embedded coordinator: the ``Coordinator`` Protocol on one SQLite file in the home.

For one host and no servers (``nereus quickstart``, ``--workers N``): every process opens
``<home>/coordinator.db`` with its own ``SqliteCoordinator``. The file and its transactions
are ``sqlite_store``, sessions ``sqlite_session``, notifications ``sqlite_notifications``.
Semantics follow Oxia's server (``docs/coordination.md``): ``version_id`` is the store's
revision after a write, one fencing counter for all writers of the file; expected versions
as Oxia's; a durable put over an ephemeral record makes it durable; a session is over once
its deadline is not ahead of now, and its records are left out from then on. Deadlines are
on the ``clock``'s monotonic reading, so a test's ``FakeClock`` decides when sessions
expire; every process using one file must use clocks that agree.
"""

from __future__ import annotations

import builtins
import threading
from pathlib import Path
from typing import Final

from nereus.adapters.backends.coordination.coordinator_clock import SYSTEM_CLOCK, CoordinatorClock
from nereus.adapters.backends.coordination.sqlite_notifications import (
    SqliteNotifications,
    newest_change,
)
from nereus.adapters.backends.coordination.sqlite_session import SqliteSession
from nereus.adapters.backends.coordination.sqlite_store import (
    RECORD_COLUMNS,
    VISIBLE,
    SqliteStore,
    WriteTx,
    current_boot_id,
    record_of,
)
from nereus.coordination.errors import (
    KeyNotFound,
    SessionExpired,
    UnexpectedVersionId,
)
from nereus.coordination.protocol import Session, SessionTime, close_handles
from nereus.coordination.records import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    NotificationType,
    Record,
    Version,
)
from nereus.layout import HomeLayout

DEFAULT_MAX_CHANGES: Final = 100_000
MIN_TTL_MS: Final = 10


class SqliteCoordinator:
    """``nereus.coordination.Coordinator`` on a SQLite file shared by a host's processes."""

    def __init__(self, path: Path, *, clock: CoordinatorClock = SYSTEM_CLOCK,
                 boot_id: str | None = None, busy_timeout_s: float = 10.0,
                 max_changes: int = DEFAULT_MAX_CHANGES, reap_interval_s: float = 1.0,
                 poll_interval_s: float = 0.05, heartbeats_per_ttl: int = 3) -> None:
        self._clock = clock
        self._store = SqliteStore(path, clock=clock, boot_id=boot_id or current_boot_id(),
                                  busy_timeout_s=busy_timeout_s, max_changes=max_changes)
        self._poll_interval_s = poll_interval_s
        self._heartbeats_per_ttl = heartbeats_per_ttl
        self._lock = threading.Lock()  # guards the lists of what this object made
        self._sessions: list[SqliteSession] = []
        self._subscriptions: list[SqliteNotifications] = []
        self._stop = threading.Event()
        self.last_reap_error: str | None = None
        self._reap_interval_s = reap_interval_s
        self._reaper = threading.Thread(target=self._reap_loop, daemon=True,
                                        name=f"coordinator-reaper-{path.name}")
        self._reaper.start()

    @classmethod
    def in_home(cls, home: Path, *, clock: CoordinatorClock = SYSTEM_CLOCK) -> SqliteCoordinator:
        """The embedded coordinator of a home (``<home>/coordinator.db``)."""
        return cls(HomeLayout(home).coordinator, clock=clock)

    @property
    def path(self) -> Path:
        return self._store.path

    # sessions ---------------------------------------------------------------------------
    def create_session(self, ttl_ms: int, *, client_identity: str) -> SqliteSession:
        if ttl_ms < MIN_TTL_MS:
            raise ValueError(f"a session's TTL is at least {MIN_TTL_MS} ms, not {ttl_ms}")
        started_ms = self._clock.monotonic_ms()
        with self._store.write() as tx:
            (session_id,) = tx.conn.execute(
                "INSERT INTO sessions (client_identity, ttl_ms, deadline_ms) "
                "VALUES (?, ?, ?) RETURNING session_id",
                (client_identity, ttl_ms, tx.now_ms + ttl_ms)).fetchone()
        session = SqliteSession(
            self._store, self._clock, session_id=session_id, ttl_ms=ttl_ms,
            client_identity=client_identity, certain_until_ms=started_ms + ttl_ms,
            heartbeat_interval_ms=max(ttl_ms // self._heartbeats_per_ttl, 1))
        with self._lock:
            self._sessions = [s for s in self._sessions if not s.lost()] + [session]
        return session

    # records ----------------------------------------------------------------------------
    def put(self, key: str, value: bytes, *, expected_version_id: int | None = None,
            ephemeral: Session | None = None) -> Version:
        if ephemeral is not None and ephemeral.lost():
            raise SessionExpired(ephemeral.session_id, "lost before this put")
        with self._store.write() as tx:
            before = tx.version_of(key)
            _check_expected(key, expected_version_id, before)
            session_id, identity = None, None
            if ephemeral is not None:
                session_id, identity = ephemeral.session_id, _session_identity(tx, ephemeral)
            version = Version(
                version_id=tx.next_revision(),
                modifications_count=0 if before is None else before.modifications_count + 1,
                created_timestamp_ms=tx.wall_ms if before is None
                else before.created_timestamp_ms,
                modified_timestamp_ms=tx.wall_ms, session_id=session_id,
                client_identity=identity)
            tx.conn.execute(
                "INSERT OR REPLACE INTO records (key, value, version_id, modifications_count, "
                "created_ms, modified_ms, session_id, client_identity) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, value, version.version_id, version.modifications_count,
                 version.created_timestamp_ms, version.modified_timestamp_ms, session_id,
                 identity))
            tx.note(NotificationType.KEY_CREATED if before is None
                    else NotificationType.KEY_MODIFIED, key, version.version_id)
        return version

    def get(self, key: str) -> Record:
        with self._store.read() as tx:
            row = tx.conn.execute(
                f"SELECT {RECORD_COLUMNS} FROM records r {VISIBLE} AND r.key = :key",
                {"now": tx.now_ms, "key": key}).fetchone()
        if row is None:
            raise KeyNotFound(key)
        return record_of(row)

    def delete(self, key: str, *, expected_version_id: int | None = None) -> bool:
        with self._store.write() as tx:
            before = tx.version_of(key)
            if expected_version_id is not None:
                _check_expected(key, expected_version_id, before)
            if before is None:
                return False
            tx.next_revision()
            tx.delete_keys([key])
        return True

    def delete_range(self, min_key_inclusive: str, max_key_exclusive: str) -> None:
        with self._store.write() as tx:
            keys = [k for (k,) in tx.conn.execute(
                "SELECT key FROM records WHERE key >= ? AND key < ? ORDER BY key",
                (min_key_inclusive, max_key_exclusive))]
            if keys:
                tx.next_revision()
                tx.delete_keys(keys)

    def list(self, min_key_inclusive: str, max_key_exclusive: str) -> builtins.list[str]:
        return [r.key for r in self.range_scan(min_key_inclusive, max_key_exclusive)]

    def range_scan(self, min_key_inclusive: str,
                   max_key_exclusive: str) -> builtins.list[Record]:
        with self._store.read() as tx:
            rows = tx.conn.execute(
                f"SELECT {RECORD_COLUMNS} FROM records r {VISIBLE} "
                "AND r.key >= :low AND r.key < :high ORDER BY r.key",
                {"now": tx.now_ms, "low": min_key_inclusive,
                 "high": max_key_exclusive}).fetchall()
        return [record_of(row) for row in rows]

    def session_time(self, session_id: int) -> SessionTime | None:
        """``SessionClock``: the session's deadline less the store's now."""
        with self._store.read() as tx:
            row = tx.conn.execute("SELECT deadline_ms, ttl_ms FROM sessions WHERE "
                                  "session_id = ?", (session_id,)).fetchone()
            now = tx.now_ms
        if row is None or row[0] <= now:
            return None
        return SessionTime(left_ms=row[0] - now, ttl_ms=row[1],
                           heartbeats_per_ttl=self._heartbeats_per_ttl)

    # notifications ----------------------------------------------------------------------
    def get_notifications(self, prefix: str) -> SqliteNotifications:
        with self._store.read() as tx:
            after = newest_change(tx)
        subscription = SqliteNotifications(self._store, prefix, after_seq=after,
                                           poll_interval_s=self._poll_interval_s)
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if not s.closed]
            self._subscriptions.append(subscription)
        return subscription

    # expiry -----------------------------------------------------------------------------
    def reap(self) -> int:
        """End the sessions whose deadline has passed (deleting their records); how many.
        Every write does this too; the reaper thread calls it every ``reap_interval_s``
        so that notifications of an expiry come even when nobody writes."""
        with self._store.read() as tx:
            due = tx.conn.execute("SELECT 1 FROM sessions WHERE deadline_ms <= ? LIMIT 1",
                                  (tx.now_ms,)).fetchone()
        if due is None:
            return 0
        with self._store.write(reap=False) as write:
            return write.reap()

    def _reap_loop(self) -> None:
        while not self._clock.wait(self._stop, self._reap_interval_s):
            try:
                self.reap()
            except Exception as exc:  # kept for the owner; every write reaps too
                self.last_reap_error = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        """Close this object's subscriptions and sessions (their records go now), stop the
        reaper and close the connection. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            sessions, self._sessions = self._sessions, []
            subscriptions, self._subscriptions = self._subscriptions, []
        failed = close_handles(subscriptions, sessions)
        self._reaper.join()
        self._store.close()
        if failed is not None:
            raise failed

    def __enter__(self) -> SqliteCoordinator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _check_expected(key: str, expected: int | None, before: Version | None) -> None:
    """Oxia's check: absent passes only "must not exist"; present only its own version."""
    if expected is None:
        return
    actual = None if before is None else before.version_id
    if (before is None) != (expected == EXPECTED_RECORD_DOES_NOT_EXIST) or \
            (before is not None and actual != expected):
        raise UnexpectedVersionId(key, expected, actual)


def _session_identity(tx: WriteTx, session: Session) -> str:
    """The identity of a session that is alive in the store (expired ones were just
    ended by this transaction's reap), or ``SessionExpired``."""
    row = tx.conn.execute("SELECT client_identity FROM sessions WHERE session_id = ?",
                          (session.session_id,)).fetchone()
    if row is None:
        raise SessionExpired(session.session_id, "the store has no such session any more")
    return str(row[0])
