"""The embedded coordinator's SQLite file: schema, transactions, and what every write does
first and last.

One WAL-mode file shared by every process of the host, a connection per ``SqliteStore``.
Writes are ``BEGIN IMMEDIATE`` (the write lock taken at the start: no upgrade deadlock);
readers see one snapshot; ``synchronous=FULL``. Tables: ``meta`` (revision, the fencing
counter; ``trimmed_through``; ``boot_id``; schema version), ``sessions``, ``records``,
``changes`` (the notification log). Every write first ends the expired sessions (their
records deleted with KEY_DELETED changes) and every read leaves their records out, so no
ephemeral record outlives its session's deadline. Deadlines are on the monotonic clock:
the first process after a reboot (a new ``boot_id``) ends every session. The change log
keeps ``max_changes`` rows; a subscriber behind ``trimmed_through`` gets
``NotificationsLost``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock
from nereus.coordination.errors import CoordinatorUnavailable
from nereus.coordination.records import NotificationType, Record, Version

SCHEMA_VERSION: Final = 1
BOOT_ID_FILE: Final = Path("/proc/sys/kernel/random/boot_id")
LOCK_RETRY_S: Final = 0.001  # between two tries for the write lock

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    session_id INTEGER PRIMARY KEY AUTOINCREMENT,
    client_identity TEXT NOT NULL,
    ttl_ms INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_by_deadline ON sessions (deadline_ms);
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    version_id INTEGER NOT NULL,
    modifications_count INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    modified_ms INTEGER NOT NULL,
    session_id INTEGER,
    client_identity TEXT) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_by_session ON records (session_id)
    WHERE session_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    key TEXT NOT NULL,
    version_id INTEGER);
INSERT OR IGNORE INTO meta (name, value) VALUES
    ('schema_version', 1), ('revision', 0), ('trimmed_through', 0), ('boot_id', NULL);
"""

RECORD_COLUMNS: Final = ("r.key, r.value, r.version_id, r.modifications_count, r.created_ms, "
                         "r.modified_ms, r.session_id, r.client_identity")
# a record is visible while it is durable or its session's deadline is still ahead
VISIBLE: Final = ("LEFT JOIN sessions s ON s.session_id = r.session_id "
                  "WHERE (r.session_id IS NULL OR s.deadline_ms > :now)")

RecordRow = tuple[str, bytes, int, int, int, int, int | None, str | None]


def record_of(row: RecordRow) -> Record:
    key, value, version_id, count, created_ms, modified_ms, session_id, identity = row
    return Record(key=key, value=bytes(value), version=Version(
        version_id=version_id, modifications_count=count, created_timestamp_ms=created_ms,
        modified_timestamp_ms=modified_ms, session_id=session_id, client_identity=identity))


def current_boot_id() -> str:
    """This boot of the host (Linux); a constant where the kernel does not say, in which
    case a reboot is not detected and deadlines from before it may outlive it."""
    try:
        return BOOT_ID_FILE.read_text().strip()
    except OSError:
        return "unknown"


class ReadTx:
    """One consistent snapshot, read at monotonic ``now_ms``."""

    def __init__(self, conn: sqlite3.Connection, now_ms: int) -> None:
        self.conn = conn
        self.now_ms = now_ms

    def meta(self, name: str) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return int(row[0])


class WriteTx(ReadTx):
    """One write transaction holding the file's write lock; ``wall_ms`` stamps records."""

    def __init__(self, conn: sqlite3.Connection, now_ms: int, wall_ms: int) -> None:
        super().__init__(conn, now_ms)
        self.wall_ms = wall_ms
        self.changed = False

    def next_revision(self) -> int:
        """Advance the store's counter; the new value versions this transaction's puts."""
        row = self.conn.execute("UPDATE meta SET value = value + 1 WHERE name = 'revision' "
                                "RETURNING value").fetchone()
        return int(row[0])

    def note(self, kind: NotificationType, key: str, version_id: int | None) -> None:
        """Append one change to the notification log."""
        self.conn.execute("INSERT INTO changes (type, key, version_id) VALUES (?, ?, ?)",
                          (kind.value, key, version_id))
        self.changed = True

    def version_of(self, key: str) -> Version | None:
        row = self.conn.execute(f"SELECT {RECORD_COLUMNS} FROM records r WHERE r.key = ?",
                                (key,)).fetchone()
        return None if row is None else record_of(row).version

    def delete_keys(self, keys: list[str]) -> None:
        """Delete these records (they exist), one KEY_DELETED change each."""
        for key in keys:
            self.conn.execute("DELETE FROM records WHERE key = ?", (key,))
            self.note(NotificationType.KEY_DELETED, key, None)

    def end_session(self, session_id: int) -> bool:
        """Delete the session and its records now; False if it was already gone."""
        keys = [k for (k,) in self.conn.execute(
            "SELECT key FROM records WHERE session_id = ? ORDER BY key", (session_id,))]
        if keys:
            self.next_revision()
            self.delete_keys(keys)
        gone = self.conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
        return gone.rowcount > 0

    def reap(self) -> int:
        """End every session whose deadline has passed; how many ended."""
        expired = [sid for (sid,) in self.conn.execute(
            "SELECT session_id FROM sessions WHERE deadline_ms <= ? ORDER BY session_id",
            (self.now_ms,))]
        for session_id in expired:
            self.end_session(session_id)
        return len(expired)

    def trim(self, max_changes: int) -> None:
        """Keep the newest ``max_changes`` changes (trimming in steps of a tenth of that)."""
        newest, oldest = self.conn.execute("SELECT max(seq), min(seq) FROM changes").fetchone()
        if newest is None or newest - oldest < max_changes + max(max_changes // 10, 1):
            return
        through = newest - max_changes
        self.conn.execute("DELETE FROM changes WHERE seq <= ?", (through,))
        self.conn.execute("UPDATE meta SET value = ? WHERE name = 'trimmed_through'",
                          (through,))


class SqliteStore:
    """A connection to the coordinator file, with its transactions."""

    def __init__(self, path: Path, *, clock: CoordinatorClock, boot_id: str,
                 busy_timeout_s: float, max_changes: int) -> None:
        self.path = path
        self._clock = clock
        self._max_changes = max_changes
        self._busy_timeout_s = busy_timeout_s
        self._busy_timeout_ms = round(busy_timeout_s * 1000)
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # WAL and SHM inherit 0600
        try:
            self._conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise self._unavailable("cannot be opened", exc) from exc
        with self.write(reap=False) as tx:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    tx.conn.execute(statement)
            self._check_boot(tx, boot_id)

    def _unavailable(self, what: str, exc: BaseException) -> CoordinatorUnavailable:
        return CoordinatorUnavailable(
            f"coordinator {self.path}: {what}: {exc}",
            hint="another process may hold the file's write lock for too long, or the "
                 "disk is full or read-only")

    @staticmethod
    def _check_boot(tx: WriteTx, boot_id: str) -> None:
        row = tx.conn.execute("SELECT value FROM meta WHERE name = 'boot_id'").fetchone()
        if row[0] == boot_id:
            return
        for (session_id,) in tx.conn.execute("SELECT session_id FROM sessions").fetchall():
            tx.end_session(session_id)
        tx.conn.execute("UPDATE meta SET value = ? WHERE name = 'boot_id'", (boot_id,))

    @contextmanager
    def write(self, *, reap: bool = True) -> Iterator[WriteTx]:
        """A write transaction: expired sessions are ended first; the change log is
        trimmed and everything committed at the end, or nothing if the body raises."""
        with self._lock:
            conn = self._conn
            try:
                self._begin_immediate()
                tx = WriteTx(conn, self._clock.monotonic_ms(), self._clock.wall_ms())
                if reap:
                    tx.reap()
                yield tx
                if tx.changed:
                    tx.trim(self._max_changes)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise self._unavailable("write failed", exc) from exc
            except BaseException:
                self._rollback()
                raise

    def _begin_immediate(self) -> None:
        """Take the file's write lock, trying every ``LOCK_RETRY_S`` until the busy timeout.

        SQLite's own busy handler sleeps longer and longer between tries (up to 100 ms),
        so a process that writes in a tight loop would keep the lock from one that waits
        (and from its heartbeats); trying again soon and often gives each waiter its turn.
        """
        conn = self._conn
        deadline = time.monotonic() + self._busy_timeout_s
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or \
                            time.monotonic() >= deadline:
                        raise
                time.sleep(LOCK_RETRY_S)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    @contextmanager
    def read(self) -> Iterator[ReadTx]:
        """A read transaction on one snapshot, with the monotonic time it is read at."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN")
                yield ReadTx(conn, self._clock.monotonic_ms())
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise self._unavailable("read failed", exc) from exc
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            # a broken connection cannot roll back; the next transaction reports it
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
