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

import threading

from nereus.adapters.coordination.clock import CoordinatorClock
from nereus.adapters.coordination.sqlite_store import SqliteStore
from nereus.coordination.errors import SessionExpired


class SqliteSession:
    """One session (``nereus.coordination.Session``) of a ``SqliteCoordinator``."""

    def __init__(self, store: SqliteStore, clock: CoordinatorClock, *, session_id: int,
                 ttl_ms: int, client_identity: str, certain_until_ms: int,
                 heartbeat_interval_ms: int) -> None:
        self._store = store
        self._clock = clock
        self._session_id = session_id
        self._ttl_ms = ttl_ms
        self._client_identity = client_identity
        self._interval_s = heartbeat_interval_ms / 1000
        self._state = threading.Lock()  # guards the deadline, the reason and closing
        self._certain_until_ms = certain_until_ms
        self._why_lost: str | None = None
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._closing = False
        self.last_error: str | None = None  # the latest failed heartbeat, if any
        self._thread = threading.Thread(target=self._keep_alive_loop, daemon=True,
                                        name=f"coordinator-session-{session_id}")
        self._thread.start()

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    @property
    def client_identity(self) -> str:
        return self._client_identity

    def __repr__(self) -> str:
        return f"SqliteSession({self._session_id}, ttl_ms={self._ttl_ms})"

    # liveness ---------------------------------------------------------------------------
    def certain_until_ms(self) -> int:
        with self._state:
            return 0 if self._lost.is_set() else self._certain_until_ms

    def lost(self) -> bool:
        if not self._lost.is_set() and self._clock.monotonic_ms() >= self.certain_until_ms():
            self._lose("no heartbeat was acknowledged within its TTL")
        return self._lost.is_set()

    def wait_lost(self, timeout_s: float) -> bool:
        return self._lost.wait(timeout_s) or self.lost()

    def _lose(self, why: str) -> None:
        with self._state:
            if self._why_lost is None:
                self._why_lost = why
            self._lost.set()
        self._stop.set()

    def expired(self) -> SessionExpired:
        """The error a use of this lost session raises."""
        with self._state:
            return SessionExpired(self._session_id, self._why_lost or "lost")

    # heartbeats -------------------------------------------------------------------------
    def keep_alive(self) -> None:
        if self.lost():
            raise self.expired()
        started_ms = self._clock.monotonic_ms()
        with self._store.write() as tx:
            updated = tx.conn.execute(
                "UPDATE sessions SET deadline_ms = ? WHERE session_id = ?",
                (tx.now_ms + self._ttl_ms, self._session_id)).rowcount
        if not updated:
            self._lose("the store ended it: no heartbeat reached it within its TTL")
            raise self.expired()
        with self._state:
            self._certain_until_ms = max(self._certain_until_ms, started_ms + self._ttl_ms)

    def _keep_alive_loop(self) -> None:
        while not self._clock.wait(self._stop, self._interval_s):
            if self.lost():
                break
            try:
                self.keep_alive()
            except SessionExpired:
                break
            except Exception as exc:  # kept for the holder; lost() bounds it
                self.last_error = f"{type(exc).__name__}: {exc}"
        if not self._closing:
            self._end_in_store()  # lost: make sure its records go now, not at the deadline

    # ending -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._state:
            if self._closing:
                return
            self._closing = True
        self._lose("closed by its holder")
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._end_in_store(best_effort=False)

    def _end_in_store(self, *, best_effort: bool = True) -> None:
        try:
            with self._store.write() as tx:
                tx.end_session(self._session_id)
        except Exception as exc:
            if not best_effort:
                raise
            self.last_error = f"{type(exc).__name__}: {exc}"
