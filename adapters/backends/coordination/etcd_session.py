"""A session of the etcd coordinator: a lease, kept alive by a thread the session owns.

The thread sends a keep-alive ``heartbeats_per_ttl`` times per TTL and never dies of an
error (a failure is kept in ``last_error`` and retried at the next beat). Once no
keep-alive has been acknowledged for a whole TTL the session is **lost**: the thread
revokes the lease (its records go now) and stops; a keep-alive answered without a TTL
means etcd expired it, lost at once. ``certain_until_ms`` is the *send* time of the latest
acknowledged keep-alive plus the TTL etcd answered: etcd restarts the TTL on arrival, so
the lease cannot expire before then (a restart or a new leader only extends it).
"""

from __future__ import annotations

import threading

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock
from nereus.adapters.backends.coordination.etcd_wire import Gateway
from nereus.adapters.backends.coordination.heartbeat_session import HeartbeatSession


class EtcdSession(HeartbeatSession):
    """One session (``nereus.coordination.Session``) of an ``EtcdCoordinator``: an etcd
    lease, whose id is the ``session_id``."""

    ENDED_BY_BACKEND = "etcd expired its lease: no keep-alive reached it within its TTL"

    def __init__(self, gateway: Gateway, clock: CoordinatorClock, *, lease_id: int,
                 ttl_ms: int, client_identity: str, certain_until_ms: int,
                 heartbeat_interval_ms: int) -> None:
        super().__init__(clock, session_id=lease_id, ttl_ms=ttl_ms,
                         client_identity=client_identity, certain_until_ms=certain_until_ms,
                         heartbeat_interval_ms=heartbeat_interval_ms,
                         thread_name=f"etcd-session-{lease_id:x}")
        self._gateway = gateway  # this session's own client, used under _call
        self._call = threading.Lock()
        self._start()

    def __repr__(self) -> str:
        return f"EtcdSession(lease {self.session_id:x}, ttl_ms={self.ttl_ms})"

    def _beat(self) -> int | None:
        """One keep-alive: etcd restarts the TTL when the request arrives, after it was
        sent, so the lease lives at least until the send time plus the TTL it answers."""
        with self._call:
            ttl_s = self._gateway.keep_alive(self.session_id)
        return ttl_s * 1000 if ttl_s > 0 else None

    def _end_now(self) -> None:
        with self._call:
            self._gateway.revoke(self.session_id)  # False: etcd expired it already

    def _release(self) -> None:
        with self._call:
            self._gateway.close()
