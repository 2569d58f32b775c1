"""Lease safety: a producer call is allowed only while the node's coordinator session is
certainly alive for longer than the safety margin."""

from __future__ import annotations

from dataclasses import dataclass

from nereus.engine.hosting.cluster.lease import SessionLease
from tests.fake_clock import FakeClock


@dataclass
class StubSession:
    """What the lease reads of a session: its id, its certain-until instant, whether lost."""

    certain_ms: int
    is_lost: bool = False
    session_id: int = 7

    def certain_until_ms(self) -> int:
        return self.certain_ms

    def lost(self) -> bool:
        return self.is_lost


def test_the_gate_closes_before_the_session_can_have_expired() -> None:
    """Open while more than the margin is left; closed (saying how much is left) once the
    margin is reached, as after a pause longer than the heartbeats' slack; closed when lost."""
    clock = FakeClock()
    start = clock.monotonic_ms()
    session = StubSession(certain_ms=start + 10_000)
    lease = SessionLease(session, clock, margin_ms=2_000)
    assert lease.lease_problem() is None
    clock.advance(7.9)
    assert lease.lease_problem() is None
    clock.advance(0.2)
    problem = lease.lease_problem()
    assert problem is not None and "for only 1900 ms more" in problem
    session.certain_ms = clock.monotonic_ms() + 10_000  # a heartbeat was acknowledged
    assert lease.lease_problem() is None
    session.is_lost = True
    assert lease.lease_problem() == "its coordinator session 7 is over"
