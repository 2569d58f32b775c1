"""A session of the Oxia coordinator, kept alive by a thread the session owns
(``HeartbeatSession``).

Oxia restarts a session's timeout when a ``KeepAlive`` arrives, so the session lives at
least until the *send* time of the latest acknowledged keep-alive plus its timeout:
``certain_until_ms`` (a server restart only extends it). Sessions last 2 s to 5 min. Oxia
still answers OK to a keep-alive of a session whose timer has fired until its records are
deleted; such an answer arrives only after ``certain_until_ms``, so an acknowledgement at or
after that instant proves nothing: the session counts as lost, never extended by it.
"""

from __future__ import annotations

import contextlib

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock
from nereus.adapters.backends.coordination.heartbeat_session import HeartbeatSession
from nereus.adapters.backends.coordination.oxia_wire import OxiaWire, UnknownSession

MIN_TTL_MS = 2_000  # Oxia's MinSessionTimeout
MAX_TTL_MS = 300_000  # Oxia's MaxSessionTimeout


class OxiaSession(HeartbeatSession):
    """One session (``nereus.coordination.Session``) of an ``OxiaCoordinator``."""

    ENDED_BY_BACKEND = "Oxia ended the session: no keep-alive reached it within its TTL"

    def __init__(self, wire: OxiaWire, clock: CoordinatorClock, *, session_id: int,
                 ttl_ms: int, client_identity: str, certain_until_ms: int,
                 heartbeat_interval_ms: int) -> None:
        super().__init__(clock, session_id=session_id, ttl_ms=ttl_ms,
                         client_identity=client_identity, certain_until_ms=certain_until_ms,
                         heartbeat_interval_ms=heartbeat_interval_ms,
                         thread_name=f"oxia-session-{session_id}")
        self._wire = wire  # the coordinator's: gRPC runs concurrent calls side by side
        self._start()

    def __repr__(self) -> str:
        return f"OxiaSession({self.session_id}, ttl_ms={self.ttl_ms})"

    def _beat(self) -> int | None:
        deadline_ms = self.certain_until_ms()
        pb = self._wire.pb
        try:
            self._wire.unary("KeepAlive", pb.SessionHeartbeat, pb.KeepAliveResponse,
                             lambda shard: pb.SessionHeartbeat(
                                 shard=shard, session_id=self.session_id))
        except UnknownSession:
            return None
        if self._clock.monotonic_ms() >= deadline_ms:
            self._lose("a keep-alive was acknowledged only after the session's TTL had run "
                       "out (Oxia may have ended it meanwhile)")
            return None
        return self.ttl_ms

    def _end_now(self) -> None:
        pb = self._wire.pb
        with contextlib.suppress(UnknownSession):  # Oxia ended it already: its records went
            self._wire.unary("CloseSession", pb.CloseSessionRequest, pb.CloseSessionResponse,
                             lambda shard: pb.CloseSessionRequest(
                                 shard=shard, session_id=self.session_id))
