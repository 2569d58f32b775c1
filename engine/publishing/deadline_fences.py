"""A lane's destination as a recovering shard owner fences it: each ``fence`` under a deadline.

A shard's recovery asks every lane whose destination can fence its writers
(``adapters/backends/destination/fencing.py``) to take the shard's writer fence and
classify its orphans. The call runs on a thread of its own (``DestinationCalls``, apart
from the publishes and the evidence scans) and is waited for at most ``timeout_s``;
recoveries of several shards take turns (one fence at a time per lane). A destination
that cannot fence, a fence that hangs or fails, all raise ``NotFenced`` saying why: the
orphans then stay UNKNOWN, as without fencing, and no recovery waits longer than that.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from nereus.adapters.backends.destination.fencing import Fenced, Fencing, NotFenced
from nereus.adapters.backends.destination.protocol import Destination
from nereus.adapters.time_source import Clock
from nereus.engine.publishing.destination_calls import DestinationCalls, Raised, Returned
from nereus.engine.runtime.event_log import EventLog, null_event_log
from nereus.evidence_mac import ExpectedMac

FENCE_TIMEOUT_S = 10.0  # a recovery waits this long for one lane's fence at most (a broker's
# init_transactions and its scan take seconds)


class DeadlineFences:
    def __init__(self, destination: Destination, clock: Clock, *,
                 timeout_s: float = FENCE_TIMEOUT_S, events: EventLog = null_event_log) -> None:
        self.destination = destination
        self.timeout_s = timeout_s
        self.calls = DestinationCalls(f"fence-{destination.name}", clock, events=events)
        self._turn = threading.Lock()

    @property
    def can_fence(self) -> bool:
        """Whether this lane's destination fences its writers at all."""
        return isinstance(self.destination, Fencing)

    def fence(self, shard: str, wanted: Mapping[str, ExpectedMac], since_ms: int) -> Fenced:
        destination = self.destination
        if not isinstance(destination, Fencing):
            raise NotFenced(f"destination {destination.name} cannot fence its writers")
        if not self._turn.acquire(timeout=self.timeout_s):
            raise NotFenced(f"another shard's fence of {destination.name} is still running")
        try:
            outcome = self.calls.run(
                "fence", lambda: destination.fence(shard, wanted, since_ms), self.timeout_s)
        finally:
            self._turn.release()
        if isinstance(outcome, Returned):
            return outcome.value
        if isinstance(outcome, Raised):
            if isinstance(outcome.error, NotFenced):
                raise outcome.error
            raise NotFenced(f"the fence failed: {outcome.describe()}")
        raise NotFenced(outcome.describe())

    def release(self, shard: str) -> None:
        """Give the fence up (the shard's loop has ended), on the caller's thread."""
        if isinstance(self.destination, Fencing):
            self.destination.release(shard)

    def close(self) -> None:
        self.calls.close()
