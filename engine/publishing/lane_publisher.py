"""Lane publishers: one thread per lane drives its destination, never the state store.

A shard loop hands over an attempt only once its admission is applied and synced; the
publisher batches requests, asks each loop's owner gate just before the call, and hands
every result back to its loop, which logs it as a PUBLISH_OUTCOME. A failed call makes the
lane NOT READY (only it stops claiming) until a probe passes; requests queued meanwhile are
declined (NOT_PUBLISHED LANE_UNAVAILABLE), never sent into a failing destination. Every
call has a deadline (``destination_calls``): a new publisher is NOT READY until its first
probe answers, so start-up never waits; a publish past ``publish_timeout_s`` makes its jobs
UNKNOWN, declines those behind it, releases their permits, and forwards a late answer as
evidence. Time comes from the engine's ``Clock`` (``docs/rules.md`` §1, §5).
"""

from __future__ import annotations

import queue
import threading
from collections import deque

from nereus.adapters.backends.destination.protocol import Destination, PublishRequest, PublishResult
from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.engine.publishing.deadline_fences import DeadlineFences
from nereus.engine.publishing.destination_calls import (
    Busy,
    Closed,
    DeadlineScans,
    DestinationCalls,
    Finished,
    Overdue,
    Raised,
    Returned,
)
from nereus.engine.publishing.publish_jobs import (
    PROBE_TIMEOUT_S,
    PUBLISH_TIMEOUT_S,
    PublishJob,
    Reply,
    SendGate,
    always_open,
)
from nereus.engine.runtime.event_log import EventLog, null_event_log, safe_event
from nereus.engine.runtime.supervisor import Supervised, Supervisor
from nereus.records import Disposition, Outcome

# the longest an idle publisher waits for a job before it looks at its Clock again (whether
# a probe is due); a real wait, so a probe due on a FakeClock is made this soon after advance
IDLE_POLL_S = 0.25
FIRST_PROBE = "the destination has not answered its first probe yet"


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
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        self.lane = lane
        self.destination = destination
        self._clock = clock
        self._batch = batch
        self._probe_interval_s = probe_interval_s
        self._events = events
        self.publish_timeout_s = publish_timeout_s
        self.probe_timeout_s = probe_timeout_s
        # a SimpleQueue (C): a put costs no Python lock and Condition, and a shard loop
        # hands over hundreds of jobs per applied batch
        self._jobs: queue.SimpleQueue[PublishJob | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # never probed here: the first probe is the publisher thread's (start-up must not
        # wait for a destination that hangs when it is opened)
        self.not_ready_reason: str | None = FIRST_PROBE
        self._probed = False
        self._last_probe = clock.monotonic()
        self._calls = DestinationCalls(f"destination-{lane}", clock, events=events)
        # the destination as the evidence scanner calls it: each scan under a deadline too
        self.evidence = DeadlineScans(destination, clock, timeout_s=publish_timeout_s,
                                      events=events)
        # the destination as a recovering shard owner fences it (``deadline_fences``)
        self.fences = DeadlineFences(destination, clock, events=events)
        self.in_call: list[PublishJob] = []
        # taken off the queue, not sent yet (a restart sends them first)
        self._unsent: deque[PublishJob] = deque()
        # results known, not yet handed back (a restart hands them back first)
        self._unreplied: deque[tuple[PublishJob, PublishResult]] = deque()
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
        """Ask the destination, under the probe deadline, whether it can take work."""
        self._probed = True
        self._last_probe = self._clock.monotonic()
        outcome = self._calls.run("probe", self.destination.probe, self.probe_timeout_s)
        if isinstance(outcome, Returned):
            reason = outcome.value
        elif isinstance(outcome, Raised):
            reason = f"probe raised {outcome.describe()}"
        else:
            reason = outcome.describe()
        self._readiness(reason, announce=isinstance(outcome, Overdue))

    def _readiness(self, reason: str | None, *, announce: bool = False) -> None:
        """Set the lane READY (None) or NOT READY for ``reason``; a change to READY, to NOT
        READY from READY or the first probe, or a call found overdue (``announce``), is
        logged once. A reason that only changes its words is not logged again."""
        with self._lock:
            was, self.not_ready_reason = self.not_ready_reason, reason
            if reason is not None:
                self._last_probe = self._clock.monotonic()
        if reason is None:
            if was is not None:
                safe_event(self._events, "lane_ready", lane=self.lane)
        elif announce or was is None or was == FIRST_PROBE:
            safe_event(self._events, "lane_not_ready", level="warning", lane=self.lane,
                       reason=reason)

    def start(self, supervisor: Supervisor | None = None) -> None:
        """Run the publisher loop on a thread owned by ``supervisor``."""
        owner = supervisor if supervisor is not None else \
            Supervisor(self._events, clock=self._clock)
        self._worker = owner.spawn(f"publisher-{self.lane}", "publisher", self.run)

    def submit(self, request: PublishRequest, reply: Reply,
               gate: SendGate = always_open) -> None:
        self._jobs.put(PublishJob(request, reply, gate))

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
        self._calls.close()
        self.evidence.close()
        self.fences.close()
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
        """Jobs inside a destination call that has not returned (after ``stop``); the caller
        answers them UNKNOWN, and what the call says if it returns later is late evidence."""
        if self._worker is None or not self._worker.alive:
            return []
        with self._lock:
            jobs, self.in_call = self.in_call, []
        return [(job.request, job.reply) for job in jobs]

    def _decline(self, jobs: list[PublishJob], reason: str) -> None:
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

    def _take(self) -> list[PublishJob] | None:
        """The next batch (jobs a crash left unsent first); None when asked to stop."""
        jobs: list[PublishJob] = []
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
        if not self._probed:
            self._probe()  # the first probe: here, never on the engine's start-up path
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

    def _through_gates(self, jobs: list[PublishJob]) -> list[PublishJob]:
        """The jobs whose owner may still send; the others are declined, never sent.

        Each distinct gate (one per shard loop) is asked once per batch, just before the
        destination call, not once per job: the answer is the same, and asking reads the
        applied activation from RocksDB."""
        allowed: list[PublishJob] = []
        refused: list[tuple[PublishJob, PublishResult]] = []
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

    def _send(self, jobs: list[PublishJob]) -> None:
        with self._lock:
            self.in_call = jobs
            self._unsent.clear()
        requests = [j.request for j in jobs]
        outcome = self._calls.run(
            "publish", lambda: self.destination.publish(requests, self._clock.wall_ms),
            self.publish_timeout_s, late=lambda late: self._late(jobs, late))
        if isinstance(outcome, Busy | Closed | Overdue):
            self._hung(jobs, outcome)
            return
        with self._lock:
            taken = self.in_call is not jobs  # answered UNKNOWN while we waited (stop)
        if taken:
            self._late(jobs, outcome)
            return
        if isinstance(outcome, Raised):  # an adapter bug must not kill the lane or lose replies
            evidence = f"destination raised {outcome.describe()}; the send may have happened"
            results = [PublishResult(j.request.attempt_id, Outcome.UNKNOWN,
                                     Disposition.NONE, evidence) for j in jobs]
        else:
            results = outcome.value
        by_attempt = {r.attempt_id: r for r in results}
        answered: list[tuple[PublishJob, PublishResult]] = []
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
            self._readiness(failed, announce=True)

    def _hung(self, jobs: list[PublishJob], outcome: Busy | Closed | Overdue) -> None:
        """The destination call did not return by its deadline (``Overdue``: its jobs may
        have been sent, UNKNOWN) or never began, because an earlier one still hangs or the
        engine stops (``Busy``, ``Closed``: declined). Either way the lane is NOT READY until
        the call returns and a probe passes."""
        reason = outcome.describe()
        if not isinstance(outcome, Overdue):
            with self._lock:
                if self.in_call is jobs:
                    self.in_call = []
            self._readiness(reason)
            self._decline(jobs, reason)
            return
        evidence = (f"the publish call began and has not returned within "
                    f"{outcome.timeout_s:g} s; the send may have happened")
        with self._lock:  # one step: a job is either in the call or has its answer
            if self.in_call is jobs:
                self.in_call = []
                self._unreplied.extend((job, PublishResult(
                    job.request.attempt_id, Outcome.UNKNOWN, Disposition.NONE, evidence))
                    for job in jobs)
                self.failures += len(jobs)
        self._readiness(reason, announce=True)
        self._reply_known()

    def _late(self, jobs: list[PublishJob], outcome: Finished[list[PublishResult]]) -> None:
        """A publish call answered after its jobs were answered UNKNOWN (its deadline
        passed, or the engine stopped): what it says is forwarded as evidence (a PUBLISHED
        settles the UNKNOWN attempt; anything else is kept on it). Runs on the destination's
        thread or the publisher's."""
        if isinstance(outcome, Raised):
            safe_event(self._events, "destination_late_answer", lane=self.lane,
                       jobs=len(jobs), error=outcome.describe())
            return
        by_attempt = {r.attempt_id: r for r in outcome.value}
        forwarded = 0
        for job in jobs:
            result = by_attempt.get(job.request.attempt_id)
            if result is None or result.outcome == Outcome.UNKNOWN:
                continue
            forwarded += 1
            try:
                job.reply(PublishResult(
                    result.attempt_id, result.outcome, result.disposition,
                    f"answered after its deadline: {result.evidence}",
                    result.published_at_ms, result.message_fault))
            except Exception as exc:  # one failed reply must not keep the others back
                safe_event(self._events, "destination_late_answer", level="error",
                           lane=self.lane, error=f"{type(exc).__name__}: {exc}")
        safe_event(self._events, "destination_late_answer", lane=self.lane, jobs=len(jobs),
                   forwarded=forwarded)
