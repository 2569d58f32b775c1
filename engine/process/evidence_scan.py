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
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from nereus.adapters.backends.destination.protocol import Destination, PublishResult
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.engine.runtime.event_log import EventLog, null_event_log, safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.engine.shard.loop_status import ShardState
from nereus.evidence_mac import ExpectedMac
from nereus.records import Disposition, Outcome
from nereus.shard import ShardId
from nereus.state.store import ShardStore
from nereus.state.values import Attempt
from nereus.views import open_attempts

if TYPE_CHECKING:
    from nereus.adapters.admin.wire import EvidenceSearchView

WINDOW_BEFORE_MS = 60_000  # searched before an attempt's admission, and overlapped
MAX_SPAN_MS = 3_600_000  # the destination history one search reads at most
FOUND_QUIET_MS = 60_000  # an attempt whose evidence was found is not searched again this long


@dataclass
class Search:
    """An attempt's last search: when, what it found, why it failed, and how far (in
    destination time) its searches have got."""

    at_ms: int
    found: str | None
    error: str | None = None
    up_to_ms: int = 0


class EvidenceShard(Protocol):
    """What the scanner needs of one shard (a ``ShardLoop`` is one)."""

    @property
    def shard(self) -> ShardId: ...

    @property
    def state(self) -> ShardState: ...

    @property
    def store(self) -> ShardStore: ...

    def evidence_mac(self, delay_message_id: str, generation: int,
                     attempt_id: str) -> ExpectedMac:
        """The MAC(s) the attempt's destination record may carry."""
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
        self.behind = False  # the last pass left history to read: the next one runs at once
        # the span (ms) each search read, the last few hundred (``bench``, tests)
        self.scanned_ms: deque[int] = deque(maxlen=512)

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
        from nereus.adapters.admin.wire import EvidenceSearchView
        from nereus.timespec import format_time_ms

        return EvidenceSearchView(searched_at=format_time_ms(search.at_ms), found=search.found,
                                  error=search.error)

    def run(self) -> None:
        """Scan every ``interval_s`` of the Clock until asked to stop (a supervised worker
        body); while a scan is still catching up on history (``behind``), the next one
        follows at once."""
        while not self._clock.wait(self._stop, 0 if self.behind else self.interval_s):
            try:
                self.scan_once()
            except Exception as exc:  # one failed scan is reported; the next one runs
                self.behind = False
                safe_event(self._events, "evidence_scan_failed", level="warning",
                           error=f"{type(exc).__name__}: {exc}")

    def scan_once(self) -> int:
        """One pass over every shard's UNKNOWN attempts; returns how many were settled.

        Each lane's search reads only what its attempts have not been searched in: from
        where the attempt's last successful search ended (its first: from its admission),
        less ``WINDOW_BEFORE_MS`` for clocks and late appends, and at most ``MAX_SPAN_MS``
        of destination history a pass. So a pass costs the time since the last one, not
        the age of the oldest UNKNOWN attempt; a search that starts far back (a restart,
        a new attempt admitted long ago) catches up over several passes run back to back
        (``behind``)."""
        settled = 0
        now = self._clock.wall_ms()
        self.behind = False
        unknown: set[str] = set()
        for loop in list(self.shards.values()):
            if loop.state != ShardState.ACTIVE:
                continue
            by_lane: dict[str, dict[str, Attempt]] = {}
            for attempt in open_attempts(loop.store, state="UNKNOWN"):
                by_lane.setdefault(attempt.lane, {})[attempt.attempt_id] = attempt
                unknown.add(attempt.attempt_id)
            for lane, attempts in by_lane.items():
                destination = self.destinations.get(lane)
                if destination is not None:
                    settled += self._search(loop, lane, destination, attempts, now)
        for gone in set(self.searches) - unknown:  # settled or moved away: nothing to show
            del self.searches[gone]
        self.settled += settled
        return settled

    def _searched_to(self, attempt: Attempt) -> int:
        """Where ``attempt``'s search has got to: its last successful search's end, else
        its admission."""
        done = self.searches.get(attempt.attempt_id)
        return attempt.admitted_broker_ms if done is None else \
            max(done.up_to_ms, attempt.admitted_broker_ms)

    def _just_found(self, attempt_id: str, now: int) -> bool:
        """Evidence for it was found by a search less than ``FOUND_QUIET_MS`` ago: its
        PUBLISHED is on its way to the shard's log (asked again after that, in case it was
        lost on the way)."""
        done = self.searches.get(attempt_id)
        return done is not None and done.found is not None and now - done.at_ms < FOUND_QUIET_MS

    def _search(self, loop: EvidenceShard, lane: str, destination: Destination,
                attempts: Mapping[str, Attempt], now: int) -> int:
        """One bounded search of ``lane``'s destination: the attempts searched least far,
        from where they got to, over ``MAX_SPAN_MS`` at most; how many it settled."""
        reached = {attempt_id: self._searched_to(a) for attempt_id, a in attempts.items()
                   if not self._just_found(attempt_id, now)}
        if not reached:
            return 0
        since = min(reached.values()) - WINDOW_BEFORE_MS
        until = min(now, since + MAX_SPAN_MS)
        if until < now:
            self.behind = True
        # those whose own range starts inside this one; the others wait for a later pass
        asked = {attempt_id: attempts[attempt_id] for attempt_id, at in reached.items()
                 if at - WINDOW_BEFORE_MS <= until}
        # a record is evidence only with the MAC of this attempt under the route's key
        wanted = {attempt_id: loop.evidence_mac(a.delay_message_id, a.generation, attempt_id)
                  for attempt_id, a in asked.items()}
        self.scanned_ms.append(until - since)
        try:
            found = destination.scan_evidence(wanted, since, until)
        except Exception as exc:
            for attempt_id in asked:
                self.searches[attempt_id] = Search(now, None, str(exc),
                                                   up_to_ms=reached[attempt_id])
            return 0
        for attempt_id in asked:
            self.searches[attempt_id] = Search(now, found.get(attempt_id),
                                               up_to_ms=max(reached[attempt_id], until))
        for attempt_id, evidence in found.items():
            loop.reply(PublishResult(attempt_id, Outcome.PUBLISHED, Disposition.NONE,
                                     f"evidence scan: {evidence}"))
        if found:
            safe_event(self._events, "evidence_found", shard=str(loop.shard), lane=lane,
                       attempts=len(found))
        return len(found)
