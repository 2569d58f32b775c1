"""A session of the embedded coordinator: a row with a deadline, kept ahead by heartbeats.

The session object owns its keep-alive thread and nothing else does: the thread
heartbeats ``heartbeats_per_ttl`` times per TTL and ends when the session is closed or
lost. It never dies of an error: a failed heartbeat (the file busy beyond its timeout, a
full disk) is kept in ``last_error`` and tried again at the next beat, and once no
heartbeat has been acknowledged for a whole TTL the session counts as **lost** — the
store may already have ended it, so nothing may be done under it any more — and the
thread stops. ``lost()`` and ``wait_lost()`` are how its holder finds out.

``certain_until_ms`` is measured from the *start* of the latest acknowledged heartbeat:
the store set the deadline to its own later reading plus the TTL, on the same host
clock, so the session is certainly alive until then.
"""

from __future__ import annotations

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock
from nereus.adapters.backends.coordination.heartbeat_session import HeartbeatSession
from nereus.adapters.backends.coordination.sqlite_store import SqliteStore


class SqliteSession(HeartbeatSession):
    """One session (``nereus.coordination.Session``) of a ``SqliteCoordinator``."""

    ENDED_BY_BACKEND = "the store ended it: no heartbeat reached it within its TTL"

    def __init__(self, store: SqliteStore, clock: CoordinatorClock, *, session_id: int,
                 ttl_ms: int, client_identity: str, certain_until_ms: int,
                 heartbeat_interval_ms: int) -> None:
        super().__init__(clock, session_id=session_id, ttl_ms=ttl_ms,
                         client_identity=client_identity, certain_until_ms=certain_until_ms,
                         heartbeat_interval_ms=heartbeat_interval_ms,
                         thread_name=f"coordinator-session-{session_id}")
        self._store = store
        self._start()

    def __repr__(self) -> str:
        return f"SqliteSession({self.session_id}, ttl_ms={self.ttl_ms})"

    def _beat(self) -> int | None:
        """Move the session's deadline to the store's now plus the TTL (the store reads the
        same host clock after this session's ``sent_ms``)."""
        with self._store.write() as tx:
            updated = tx.conn.execute(
                "UPDATE sessions SET deadline_ms = ? WHERE session_id = ?",
                (tx.now_ms + self.ttl_ms, self.session_id)).rowcount
        return self.ttl_ms if updated else None

    def _end_now(self) -> None:
        with self._store.write() as tx:
            tx.end_session(self.session_id)
