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
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from nereus.engine.destinations.protocol import Destination, PublishRequest, PublishResult
from nereus.records import Disposition, Outcome

Reply = Callable[[PublishResult], None]


@dataclass(frozen=True, slots=True)
class _Job:
    request: PublishRequest
    reply: Reply


class LanePublisher:
    def __init__(
        self,
        lane: str,
        destination: Destination,
        *,
        now_ms: Callable[[], int],
        batch: int = 512,
        probe_interval_s: float = 0.5,
        on_event: Callable[[str, dict[str, object]], None] | None = None,
    ) -> None:
        self.lane = lane
        self.destination = destination
        self._now_ms = now_ms
        self._batch = batch
        self._probe_interval_s = probe_interval_s
        self._on_event = on_event
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.not_ready_reason: str | None = destination.probe()
        self._last_probe = time.monotonic()
        self.in_call: list[_Job] = []
        self.published = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=f"publisher-{lane}", daemon=True)

    @property
    def ready(self) -> bool:
        """Runtime readiness; never blocks (probing happens on the publisher's thread)."""
        return self.not_ready_reason is None

    def _probe_if_due(self) -> None:
        if self.not_ready_reason is None or (
            time.monotonic() - self._last_probe < self._probe_interval_s
        ):
            return
        self._probe()

    def _probe(self) -> None:
        self._last_probe = time.monotonic()
        try:
            reason = self.destination.probe()
        except Exception as exc:
            reason = f"probe raised {type(exc).__name__}: {exc}"
        with self._lock:
            was, self.not_ready_reason = self.not_ready_reason, reason
        if reason is None and was is not None:
            self._event("lane_ready", {"lane": self.lane})

    def start(self) -> None:
        self._thread.start()

    def submit(self, request: PublishRequest, reply: Reply) -> None:
        self._jobs.put(_Job(request, reply))

    def queued(self) -> int:
        return self._jobs.qsize()

    def stop(self, deadline_s: float) -> list[tuple[PublishRequest, Reply]]:
        """Stop after the call in progress (waiting up to ``deadline_s``).

        Returns the jobs that never reached the destination (the caller declines them)
        and, if the call in progress did not finish in time, its jobs too (the caller
        records those as UNKNOWN: they may have been sent).
        """
        self._stop.set()
        self._jobs.put(None)
        self._thread.join(deadline_s)
        unsent: list[tuple[PublishRequest, Reply]] = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                unsent.append((job.request, job.reply))
        return unsent

    def stuck(self) -> list[tuple[PublishRequest, Reply]]:
        """Jobs inside a destination call that has not returned (after ``stop``)."""
        if not self._thread.is_alive():
            return []
        with self._lock:
            return [(job.request, job.reply) for job in self.in_call]

    def _decline(self, jobs: list[_Job], reason: str) -> None:
        """Jobs taken while the lane is NOT READY: never handed to the destination."""
        for job in jobs:
            job.reply(PublishResult(
                job.request.attempt_id, Outcome.NOT_PUBLISHED, Disposition.LANE_UNAVAILABLE,
                f"lane {self.lane} NOT READY ({reason}): never handed to the destination"))

    def _event(self, name: str, fields: dict[str, object]) -> None:
        if self._on_event is not None:
            self._on_event(name, fields)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=self._probe_interval_s / 2)
            except queue.Empty:
                self._probe_if_due()
                continue
            if job is None or self._stop.is_set():
                if job is not None:
                    self._jobs.put(job)
                return
            jobs = [job]
            while len(jobs) < self._batch:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._stop.set()
                    break
                jobs.append(more)
            if self.not_ready_reason is not None:
                # handed over while READY, taken while NOT READY: ask the destination
                # first, and never send while it is known to be unusable
                self._probe()
                if self.not_ready_reason is not None:
                    self._decline(jobs, self.not_ready_reason)
                    continue
            with self._lock:
                self.in_call = jobs
            try:
                results = self.destination.publish([j.request for j in jobs], self._now_ms)
            except Exception as exc:  # an adapter bug must not kill the lane or lose replies
                evidence = f"destination raised {type(exc).__name__}: {exc}; the send may " \
                    "have happened"
                results = [PublishResult(j.request.attempt_id, Outcome.UNKNOWN,
                                         Disposition.NONE, evidence) for j in jobs]
            with self._lock:
                self.in_call = []
            by_attempt = {r.attempt_id: r for r in results}
            failed = None
            for item in jobs:
                result = by_attempt[item.request.attempt_id]
                if result.outcome == Outcome.PUBLISHED:
                    self.published += 1
                else:
                    self.failures += 1
                    failed = result.evidence
                item.reply(result)
            if failed is not None:
                with self._lock:
                    self.not_ready_reason = failed
                    self._last_probe = time.monotonic()
                self._event("lane_not_ready", {"lane": self.lane, "reason": failed})
