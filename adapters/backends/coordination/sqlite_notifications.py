"""Notifications of the embedded coordinator: a cursor over the change log.

Every write appends its changes to ``changes`` in the transaction that makes them, and
writes are serialised by the file's write lock, so the log's order is the order the
store made the changes in. A subscription starts at the newest change when it is made,
reads the rows after its cursor in batches, keeps those under its prefix and moves the
cursor past all of them: nothing is skipped and nothing is seen twice. If the log was
trimmed past the cursor (the subscriber fell more than the log's length behind) every
read raises ``NotificationsLost`` instead of going on with a gap.

The change log is polled: waiting for a change another process makes is a wait on real
time (``poll_interval_s`` between looks), not on the coordinator's clock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Final

from nereus.adapters.backends.coordination.sqlite_store import ReadTx, SqliteStore
from nereus.coordination.errors import NotificationsLost
from nereus.coordination.records import Notification, NotificationType

BATCH_ROWS: Final = 1_000
_NEXT_SLICE_S: Final = 1.0  # how long one look of a blocking __next__ lasts


def newest_change(tx: ReadTx) -> int:
    """The seq of the newest change in the log (or the last trimmed one, if none is kept)."""
    (newest,) = tx.conn.execute("SELECT max(seq) FROM changes").fetchone()
    return max(newest or 0, tx.meta("trimmed_through"))


class SqliteNotifications:
    """A subscription (``nereus.coordination.Notifications``) to one key prefix."""

    def __init__(self, store: SqliteStore, prefix: str, *, after_seq: int,
                 poll_interval_s: float) -> None:
        self._store = store
        self._prefix = prefix
        self._cursor = after_seq  # the seq of the last change read
        self._poll_interval_s = poll_interval_s
        self._ready: deque[Notification] = deque()
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[Notification]:
        return self

    def __next__(self) -> Notification:
        while not self._closed.is_set():
            found = self.poll(_NEXT_SLICE_S)
            if found is not None:
                return found
        raise StopIteration

    def poll(self, timeout_s: float) -> Notification | None:
        deadline = time.monotonic() + timeout_s
        while not self._closed.is_set():
            if not self._ready:
                self._read_more()
            if self._ready:
                return self._ready.popleft()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._closed.wait(min(self._poll_interval_s, left))
        return None

    def _read_more(self) -> None:
        with self._store.read() as tx:
            trimmed_through = tx.meta("trimmed_through")
            if trimmed_through > self._cursor:
                raise NotificationsLost(self._prefix, self._cursor, trimmed_through)
            rows = tx.conn.execute(
                "SELECT seq, type, key, version_id FROM changes WHERE seq > ? "
                "ORDER BY seq LIMIT ?", (self._cursor, BATCH_ROWS)).fetchall()
        for seq, kind, key, version_id in rows:
            self._cursor = seq
            change = Notification(type=NotificationType(kind), key=key, version_id=version_id)
            if change.concerns(self._prefix):
                self._ready.append(change)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
