"""Evidence recovery for UNKNOWN attempts.

An attempt whose producer response was lost (or whose owner died) is UNKNOWN and its
message UNCERTAIN. It is never retried automatically: a retry could duplicate. Instead this
background thread asks each lane's destination for positive evidence — a message carrying
the attempt-id header and this attempt's evidence MAC (``nereus.evidence_mac``, under the
route's key), published after the attempt was admitted — and turns what it finds into a
PUBLISH_OUTCOME PUBLISHED through the Shard Log. Absence of evidence changes
nothing: the attempt stays UNKNOWN until evidence appears or an operator resolves it.
The last search per attempt is kept for ``nereus attempt list``.

The scanner holds only what it needs: the shards (``EvidenceShard``: state, store, the
evidence MAC, where a result goes), each lane's destination and the engine's ``Clock``
(the scan interval and the search times), never the engine itself.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from nereus.engine.destinations.protocol import Destination, PublishResult
from nereus.engine.event_log import EventLog, null_event_log, safe_event
from nereus.engine.shard_status import ShardState
from nereus.engine.supervisor import Supervised, Supervisor
from nereus.engine.time_source import SYSTEM_CLOCK, Clock
from nereus.records import Disposition, Outcome
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from nereus.state.values import Attempt
from nereus.views import open_attempts

if TYPE_CHECKING:
    from nereus.engine.admin.documents import EvidenceSearchView

WINDOW_BEFORE_MS = 60_000


@dataclass
class Search:
    at_ms: int
    found: str | None
    error: str | None = None


class EvidenceShard(Protocol):
    """What the scanner needs of one shard (a ``ShardLoop`` is one)."""

    @property
    def shard(self) -> ShardId: ...

    @property
    def state(self) -> ShardState: ...

    @property
    def store(self) -> ShardStore: ...

    def evidence_mac(self, delay_message_id: str, generation: int, attempt_id: str) -> str:
        """The MAC the attempt's destination record carries."""
        ...

    def reply(self, result: PublishResult, /) -> None:
        """Where a found PUBLISHED goes (it becomes a PUBLISH_OUTCOME in the shard's log)."""
        ...


class EvidenceRecovery:
    def __init__(self, shards: Mapping[ShardId, EvidenceShard],
                 destinations: Mapping[str, Destination], *, clock: Clock = SYSTEM_CLOCK,
                 interval_s: float = 5.0, events: EventLog = null_event_log) -> None:
        self.shards = shards
        self.destinations = destinations
        self.interval_s = interval_s
        self._clock = clock
        self._events = events
        self._stop = threading.Event()
        self._worker: Supervised | None = None
        self.searches: dict[str, Search] = {}
        self.settled = 0

    def start(self, supervisor: Supervisor | None = None) -> None:
        owner = supervisor if supervisor is not None else \
            Supervisor(self._events, clock=self._clock)
        self._worker = owner.spawn("evidence", "evidence", self.run)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(timeout_s)

    def search_view(self, attempt_id: str) -> EvidenceSearchView | None:
        """The last search for ``attempt_id``'s record (None before the first)."""
        search = self.searches.get(attempt_id)
        if search is None:
            return None
        from nereus.engine.admin.documents import EvidenceSearchView
        from nereus.timespec import format_time_ms

        return EvidenceSearchView(searched_at=format_time_ms(search.at_ms), found=search.found,
                                  error=search.error)

    def run(self) -> None:
        """Scan every ``interval_s`` of the Clock until asked to stop (a supervised worker
        body)."""
        while not self._clock.wait(self._stop, self.interval_s):
            try:
                self.scan_once()
            except Exception as exc:  # one failed scan is reported; the next one runs
                safe_event(self._events, "evidence_scan_failed", level="warning",
                           error=f"{type(exc).__name__}: {exc}")

    def scan_once(self) -> int:
        """One pass over every shard's UNKNOWN attempts; returns how many were settled."""
        settled = 0
        now = self._clock.wall_ms()
        for loop in list(self.shards.values()):
            if loop.state != ShardState.ACTIVE:
                continue
            by_lane: dict[str, dict[str, Attempt]] = {}
            for attempt in open_attempts(loop.store, state="UNKNOWN"):
                by_lane.setdefault(attempt.lane, {})[attempt.attempt_id] = attempt
            for lane, attempts in by_lane.items():
                destination = self.destinations.get(lane)
                if destination is None:
                    continue
                since = min(a.admitted_broker_ms for a in attempts.values()) - WINDOW_BEFORE_MS
                # a record is evidence only with the MAC of this attempt under the route's key
                wanted = {attempt_id: loop.evidence_mac(a.delay_message_id, a.generation,
                                                        attempt_id)
                          for attempt_id, a in attempts.items()}
                try:
                    found = destination.scan_evidence(wanted, since, now)
                except Exception as exc:
                    for attempt_id in attempts:
                        self.searches[attempt_id] = Search(now, None, str(exc))
                    continue
                for attempt_id in attempts:
                    self.searches[attempt_id] = Search(now, found.get(attempt_id))
                for attempt_id, evidence in found.items():
                    loop.reply(PublishResult(attempt_id, Outcome.PUBLISHED, Disposition.NONE,
                                             f"evidence scan: {evidence}"))
                    settled += 1
                if found:
                    safe_event(self._events, "evidence_found", shard=str(loop.shard), lane=lane,
                                attempts=len(found))
        self.settled += settled
        return settled
