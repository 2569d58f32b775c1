"""What every coordinator session shares: a deadline kept ahead by heartbeats, on a thread
the session owns.

The thread heartbeats every ``heartbeat_interval_ms`` and ends when the session is closed
or lost. It never dies of an error: a failed heartbeat (the backend down, slow, busy) is
kept in ``last_error`` and tried again at the next beat. Once no heartbeat has been
acknowledged for a whole TTL the session counts as **lost** — the backend may have ended
it already, so nothing may be done under it any more —, the thread ends it in the backend
(so its records go now, not at some later expiry) and stops. ``lost()`` and
``wait_lost()`` are how its holder finds out; ``certain_until_ms`` is how long it is
certainly alive (each backend says from when it counts a heartbeat's TTL).

A backend's session says how one heartbeat reaches it (``_beat``), how the backend ends
the session (``_end_now``) and what else closing releases (``_release``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock
from nereus.coordination.errors import SessionExpired


class HeartbeatSession(ABC):
    """The shared part of ``nereus.coordination.Session``; a backend subclasses it."""

    # why the session is lost when the backend answers a heartbeat with "no such session"
    ENDED_BY_BACKEND = "the backend ended it: no heartbeat reached it within its TTL"

    def __init__(self, clock: CoordinatorClock, *, session_id: int, ttl_ms: int,
                 client_identity: str, certain_until_ms: int, heartbeat_interval_ms: int,
                 thread_name: str) -> None:
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
                                        name=thread_name)

    def _start(self) -> None:
        """Start heartbeating (a subclass calls it once it is fully made)."""
        self._thread.start()

    # what a backend provides ----------------------------------------------------------
    @abstractmethod
    def _beat(self) -> int | None:
        """Send one heartbeat: the TTL (ms) the backend granted, counted from just before
        the call; None when the backend no longer knows the session."""

    @abstractmethod
    def _end_now(self) -> None:
        """End the session in the backend, deleting its ephemeral records."""

    def _release(self) -> None:  # noqa: B027 - optional: most backends hold nothing more
        """What closing releases besides the session (a client of its own, say)."""

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    @property
    def client_identity(self) -> str:
        return self._client_identity

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
        sent_ms = self._clock.monotonic_ms()
        granted_ms = self._beat()
        if granted_ms is None:
            self._lose(self.ENDED_BY_BACKEND)
            raise self.expired()
        with self._state:
            self._certain_until_ms = max(self._certain_until_ms, sent_ms + granted_ms)

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
            self._end()  # lost: make sure its records go now, not at the backend's expiry

    # ending -----------------------------------------------------------------------------
    def close(self) -> None:
        """End the session: its records are deleted now. Idempotent. Raises the backend's
        error if it cannot be told (the records then go when the session expires)."""
        with self._state:
            if self._closing:
                return
            self._closing = True
        self._lose("closed by its holder")
        if threading.current_thread() is not self._thread:
            self._thread.join()
        try:
            self._end(best_effort=False)
        finally:
            self._release()

    def _end(self, *, best_effort: bool = True) -> None:
        try:
            self._end_now()
        except Exception as exc:
            if not best_effort:
                raise
            self.last_error = f"{type(exc).__name__}: {exc}"
