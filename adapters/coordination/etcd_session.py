"""A session of the etcd coordinator: a lease, kept alive by a thread the session owns.

The session object owns its keep-alive thread and its own etcd client (``Gateway``, used
under the session's lock by that thread, by the holder's ``keep_alive`` and by
``close``). The thread sends a keep-alive ``heartbeats_per_ttl`` times per TTL, each
request bounded by one beat's interval. It never dies of an error: a failed keep-alive
(etcd down, slow, restarting) is kept in ``last_error`` and tried again at the next beat.
Once no keep-alive has been acknowledged for a whole TTL, the session counts as **lost**
(etcd may have expired the lease already, so nothing may be done under it any more), the
thread revokes the lease in case etcd has not (so its records go now, not at some later
expiry) and stops. A keep-alive that etcd answers without a TTL means etcd expired the
lease: the session is lost at once.

``certain_until_ms`` is the *send* time of the latest acknowledged keep-alive plus the TTL
etcd answered: etcd restarts the TTL when the request arrives, after it was sent, so the
lease cannot expire before then. (An etcd restart or a new leader extends every lease by
its TTL, never shortens it.)
"""

from __future__ import annotations

import threading

from nereus.adapters.coordination.clock import CoordinatorClock
from nereus.adapters.coordination.etcd_wire import Gateway
from nereus.coordination.errors import SessionExpired


class EtcdSession:
    """One session (``nereus.coordination.Session``) of an ``EtcdCoordinator``: an etcd
    lease, whose id is the ``session_id``."""

    def __init__(self, gateway: Gateway, clock: CoordinatorClock, *, lease_id: int,
                 ttl_ms: int, client_identity: str, certain_until_ms: int,
                 heartbeat_interval_ms: int) -> None:
        self._gateway = gateway  # this session's own client, used under _call
        self._call = threading.Lock()
        self._clock = clock
        self._lease_id = lease_id
        self._ttl_ms = ttl_ms
        self._client_identity = client_identity
        self._interval_s = heartbeat_interval_ms / 1000
        self._state = threading.Lock()  # guards the deadline, the reason and closing
        self._certain_until_ms = certain_until_ms
        self._why_lost: str | None = None
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._closing = False
        self.last_error: str | None = None  # the latest failed keep-alive, if any
        self._thread = threading.Thread(target=self._keep_alive_loop, daemon=True,
                                        name=f"etcd-session-{lease_id:x}")
        self._thread.start()

    @property
    def session_id(self) -> int:
        return self._lease_id

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    @property
    def client_identity(self) -> str:
        return self._client_identity

    def __repr__(self) -> str:
        return f"EtcdSession(lease {self._lease_id:x}, ttl_ms={self._ttl_ms})"

    # liveness ---------------------------------------------------------------------------
    def certain_until_ms(self) -> int:
        with self._state:
            return 0 if self._lost.is_set() else self._certain_until_ms

    def lost(self) -> bool:
        if not self._lost.is_set() and self._clock.monotonic_ms() >= self.certain_until_ms():
            self._lose("no keep-alive was acknowledged within its TTL")
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
            return SessionExpired(self._lease_id, self._why_lost or "lost")

    # keep-alives ------------------------------------------------------------------------
    def keep_alive(self) -> None:
        if self.lost():
            raise self.expired()
        sent_ms = self._clock.monotonic_ms()
        with self._call:
            ttl_s = self._gateway.keep_alive(self._lease_id)
        if ttl_s <= 0:
            self._lose("etcd expired its lease: no keep-alive reached it within its TTL")
            raise self.expired()
        with self._state:
            self._certain_until_ms = max(self._certain_until_ms, sent_ms + ttl_s * 1000)

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
            self._revoke()  # lost: make sure its records go now, not at etcd's expiry

    # ending -----------------------------------------------------------------------------
    def close(self) -> None:
        """End the session: revoke its lease, so its records are deleted now. Idempotent.
        Raises ``CoordinatorUnavailable`` if etcd cannot be told (the records then go when
        the lease expires, within its TTL)."""
        with self._state:
            if self._closing:
                return
            self._closing = True
        self._lose("closed by its holder")
        if threading.current_thread() is not self._thread:
            self._thread.join()
        try:
            self._revoke(best_effort=False)
        finally:
            with self._call:
                self._gateway.close()

    def _revoke(self, *, best_effort: bool = True) -> None:
        try:
            with self._call:
                self._gateway.revoke(self._lease_id)  # False: etcd expired it already
        except Exception as exc:
            if not best_effort:
                raise
            self.last_error = f"{type(exc).__name__}: {exc}"
