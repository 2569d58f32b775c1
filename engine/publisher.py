"""Lane publishers: one thread per lane calls its destination, never the state store.

A shard loop hands an admitted attempt to its lane's publisher only after the admission
is applied and synced. The publisher batches requests, calls the destination and hands
every result back to the shard loop that sent it, which turns it into a PUBLISH_OUTCOME
record in the Shard Log. Readiness follows the destination: a failed call makes the lane
NOT READY (so the scheduler stops claiming for it, and only for it) until a probe passes.
Requests already queued when the lane turns NOT READY are not sent into a destination known
to be failing: the publisher probes first and, if the probe fails too, declines them
(NOT_PUBLISHED LANE_UNAVAILABLE: never handed to the destination, back to the timeline)
instead of turning them into UNKNOWN attempts that only an operator or evidence can settle.

Time comes from the engine's ``Clock``: the publish timestamp handed to the destination
(``wall_ms``) and the probe interval of a NOT READY lane (``monotonic``), so a test decides
when the next probe is due by advancing a ``FakeClock``.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from nereus.engine.destinations.protocol import Destination, PublishRequest, PublishResult
from nereus.engine.event_log import EventLog, null_event_log, safe_event
from nereus.engine.supervisor import Supervised, Supervisor
from nereus.engine.time_source import SYSTEM_CLOCK, Clock
from nereus.records import Disposition, Outcome


class Reply(Protocol):
    """Where a publish result goes (a shard loop's ``reply``): never raises, never blocks."""

    def __call__(self, result: PublishResult, /) -> None: ...


class SendGate(Protocol):
    """Asked just before the destination call: why this job may not be sent now, or None
    (a shard loop's ``live_owner_gate``: a fenced owner makes no further producer call)."""

    def __call__(self) -> str | None: ...


def _always_open() -> str | None:
    return None


# the longest an idle publisher waits for a job before it looks at its Clock again (whether
# a probe is due); a real wait, so a probe due on a FakeClock is made this soon after advance
IDLE_POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class _Job:
    request: PublishRequest
    reply: Reply
    gate: SendGate = _always_open


class LanePublisher:
    """One lane's publisher. Its loop (``run``) is a supervised worker body: everything it
    holds between taking a job and replying lives on this object, so a restart after a
    crash replies what it already knows, sends what it never sent, and drops nothing."""

    def __init__(
        self,
        lane: str,
        destination: Destination,
        *,
        clock: Clock = SYSTEM_CLOCK,
        batch: int = 512,
        probe_interval_s: float = 0.5,
        events: EventLog = null_event_log,
    ) -> None:
        self.lane = lane
        self.destination = destination
        self._clock = clock
        self._batch = batch
        self._probe_interval_s = probe_interval_s
        self._events = events
        # a SimpleQueue (C): a put costs no Python lock and Condition, and a shard loop
        # hands over hundreds of jobs per applied batch
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.not_ready_reason: str | None = destination.probe()
        self._last_probe = clock.monotonic()
        self.in_call: list[_Job] = []
        # taken off the queue, not sent yet (a restart sends them first)
        self._unsent: deque[_Job] = deque()
        # results known, not yet handed back (a restart hands them back first)
        self._unreplied: deque[tuple[_Job, PublishResult]] = deque()
        self.published = 0
        self.failures = 0
        self._worker: Supervised | None = None

    @property
    def ready(self) -> bool:
        """Runtime readiness; never blocks (probing happens on the publisher's thread)."""
        return self.not_ready_reason is None

    def _probe_if_due(self) -> None:
        if self.not_ready_reason is None or (
            self._clock.monotonic() - self._last_probe < self._probe_interval_s
        ):
            return
        self._probe()

    def _probe(self) -> None:
        self._last_probe = self._clock.monotonic()
        try:
            reason = self.destination.probe()
        except Exception as exc:
            reason = f"probe raised {type(exc).__name__}: {exc}"
        with self._lock:
            was, self.not_ready_reason = self.not_ready_reason, reason
        if reason is None and was is not None:
            safe_event(self._events, "lane_ready", lane=self.lane)

    def start(self, supervisor: Supervisor | None = None) -> None:
        """Run the publisher loop on a thread owned by ``supervisor``."""
        owner = supervisor if supervisor is not None else \
            Supervisor(self._events, clock=self._clock)
        self._worker = owner.spawn(f"publisher-{self.lane}", "publisher", self.run)

    def submit(self, request: PublishRequest, reply: Reply,
               gate: SendGate = _always_open) -> None:
        self._jobs.put(_Job(request, reply, gate))

    def queued(self) -> int:
        return self._jobs.qsize() + len(self._unsent)

    def stop(self, deadline_s: float) -> list[tuple[PublishRequest, Reply]]:
        """Stop after the call in progress (waiting up to ``deadline_s``).

        Returns the jobs that never reached the destination (the caller declines them)
        and, if the call in progress did not finish in time, its jobs too (the caller
        records those as UNKNOWN: they may have been sent).
        """
        self._stop.set()
        self._jobs.put(None)
        if self._worker is not None:
            self._worker.stopping()
            self._worker.join(deadline_s)
        if self._worker is None or not self._worker.alive:
            self._reply_known()
        unsent: list[tuple[PublishRequest, Reply]] = []
        while self._unsent:
            job = self._unsent.popleft()
            unsent.append((job.request, job.reply))
        while True:
            try:
                queued = self._jobs.get_nowait()
            except queue.Empty:
                break
            if queued is not None:
                unsent.append((queued.request, queued.reply))
        return unsent

    def stuck(self) -> list[tuple[PublishRequest, Reply]]:
        """Jobs inside a destination call that has not returned (after ``stop``)."""
        if self._worker is None or not self._worker.alive:
            return []
        with self._lock:
            return [(job.request, job.reply) for job in self.in_call]

    def _decline(self, jobs: list[_Job], reason: str) -> None:
        """Jobs taken while the lane is NOT READY: never handed to the destination."""
        answers = [(job, PublishResult(
            job.request.attempt_id, Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
            f"lane {self.lane} NOT READY ({reason}): never handed to the destination"))
            for job in jobs]
        with self._lock:  # one step: a declined job is answered, never also still unsent
            self._unreplied.extend(answers)
            self._unsent.clear()
        self._reply_known()

    def _reply_known(self) -> None:
        """Hand back every result already known (each is removed once delivered)."""
        while self._unreplied:
            job, result = self._unreplied[0]
            job.reply(result)
            self._unreplied.popleft()

    def _take(self) -> list[_Job] | None:
        """The next batch (jobs a crash left unsent first); None when asked to stop."""
        jobs: list[_Job] = []
        while self._unsent and len(jobs) < self._batch:
            jobs.append(self._unsent.popleft())
        if not jobs:
            try:
                job = self._jobs.get(timeout=min(self._probe_interval_s / 2, IDLE_POLL_S))
            except queue.Empty:
                self._probe_if_due()
                return []
            if job is None or self._stop.is_set():
                if job is not None:
                    self._unsent.append(job)
                return None
            jobs.append(job)
        while len(jobs) < self._batch:
            try:
                more = self._jobs.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self._stop.set()
                break
            jobs.append(more)
        return jobs

    def run(self) -> None:
        """The publisher loop (a supervised worker body; safe to call again after a crash)."""
        self._recover_after_crash()
        while not self._stop.is_set():
            jobs = self._take()
            if jobs is None:
                return
            if not jobs:
                continue
            self._unsent.extend(jobs)  # held here until the destination call begins
            if self.not_ready_reason is not None:
                # handed over while READY, taken while NOT READY: ask the destination
                # first, and never send while it is known to be unusable
                self._probe()
                if self.not_ready_reason is not None:
                    self._decline(jobs, self.not_ready_reason)
                    continue
            jobs = self._through_gates(jobs)
            if jobs:
                self._send(jobs)

    def _through_gates(self, jobs: list[_Job]) -> list[_Job]:
        """The jobs whose owner may still send; the others are declined, never sent.

        Each distinct gate (one per shard loop) is asked once per batch, just before the
        destination call, not once per job: the answer is the same, and asking reads the
        applied activation from RocksDB."""
        allowed: list[_Job] = []
        refused: list[tuple[_Job, PublishResult]] = []
        asked: dict[SendGate, str | None] = {}  # each gate asked once for the whole batch
        for job in jobs:
            gate = job.gate
            why = asked[gate] if gate in asked else asked.setdefault(gate, gate())
            if why is None:
                allowed.append(job)
            else:
                refused.append((job, PublishResult(
                    job.request.attempt_id, Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                    f"owner declined before any send: {why}")))
        if refused:
            with self._lock:  # one step: a refused job is answered, never also still unsent
                self._unreplied.extend(refused)
                self._unsent = deque(allowed)
            self._reply_known()
        return allowed

    def _recover_after_crash(self) -> None:
        """What a crash left half done: results to hand back, a call that never returned."""
        self._reply_known()
        with self._lock:
            lost, self.in_call = self.in_call, []
        for job in lost:  # the call began and its answer was lost: it may have been sent
            self._unreplied.append((job, PublishResult(
                job.request.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                "the publisher failed during the destination call; the send may have "
                "happened")))
        self._reply_known()

    def _send(self, jobs: list[_Job]) -> None:
        with self._lock:
            self.in_call = jobs
            self._unsent.clear()
        try:
            results = self.destination.publish([j.request for j in jobs], self._clock.wall_ms)
        except Exception as exc:  # an adapter bug must not kill the lane or lose replies
            evidence = f"destination raised {type(exc).__name__}: {exc}; the send may " \
                "have happened"
            results = [PublishResult(j.request.attempt_id, Outcome.UNKNOWN,
                                     Disposition.NONE, evidence) for j in jobs]
        by_attempt = {r.attempt_id: r for r in results}
        answered: list[tuple[_Job, PublishResult]] = []
        for item in jobs:
            answered.append((item, by_attempt.get(item.request.attempt_id) or PublishResult(
                item.request.attempt_id, Outcome.UNKNOWN, Disposition.NONE,
                f"destination {self.destination.name} gave no result for this request; the "
                "send may have happened")))
        with self._lock:  # one step: a job is either in the call or has its result
            self._unreplied.extend(answered)
            self.in_call = []
        failed = None
        for _, result in answered:
            if result.outcome == Outcome.PUBLISHED:
                self.published += 1
            else:
                self.failures += 1
                if not result.message_fault:  # a message's own fault leaves the lane READY
                    failed = result.evidence
        self._reply_known()
        if failed is not None:
            with self._lock:
                self.not_ready_reason = failed
                self._last_probe = self._clock.monotonic()
            safe_event(self._events, "lane_not_ready", level="warning", lane=self.lane,
                       reason=failed)
