"""A lane's destination calls, one at a time on a thread of their own, each under a deadline.

A destination that hangs (a FIFO with no reader, a broker that never answers) must not
hang the engine's start, the publisher or the evidence scan, so nothing calls a
destination itself: it hands the call to ``DestinationCalls`` and waits up to the call's
deadline on the engine's ``Clock``. The answer is ``Returned``/``Raised``; or ``Overdue``
(the call keeps its thread, and what it returns later goes to the ``late`` callback); or
``Busy`` at once while an overdue call still holds the destination (one call at a time);
or ``Closed``. ``DeadlineScans`` does the same for ``scan_evidence``. The thread is a daemon
thread this object owns: a call hung in the kernel cannot be interrupted and must not keep
the process from exiting.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nereus.adapters.backends.destination.protocol import Destination, PublishRequest, PublishResult
from nereus.adapters.time_source import Clock
from nereus.engine.runtime.event_log import EventLog, null_event_log, safe_event
from nereus.evidence_mac import ExpectedMac
from nereus.timespec import format_time_ms

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Returned(Generic[T]):
    """The call returned ``value`` in time."""

    value: T


@dataclass(frozen=True, slots=True)
class Raised:
    """The call raised ``error`` in time."""

    error: BaseException

    def describe(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


@dataclass(frozen=True, slots=True)
class Overdue:
    """The call (``what``) has not returned ``timeout_s`` after it began: it was abandoned."""

    what: str
    began_wall_ms: int
    timeout_s: float

    def describe(self) -> str:
        return hung(self.what, self.began_wall_ms, self.timeout_s)


@dataclass(frozen=True, slots=True)
class Busy:
    """An earlier call (``what``), abandoned at its deadline, still holds the destination:
    this one was never started."""

    what: str
    began_wall_ms: int
    timeout_s: float

    def describe(self) -> str:
        return hung(self.what, self.began_wall_ms, self.timeout_s)


@dataclass(frozen=True, slots=True)
class Closed:
    """The caller was closed (the engine stops): this call was never started."""

    name: str

    def describe(self) -> str:
        return f"{self.name} is closed: the engine is stopping"


def hung(what: str, began_wall_ms: int, timeout_s: float) -> str:
    """The words for a destination call that overran its deadline (one text for ``Overdue``
    and ``Busy``, so a lane's reason does not change while the call keeps hanging)."""
    return (f"the destination has not answered a {what} begun at "
            f"{format_time_ms(began_wall_ms)} (deadline {timeout_s:g} s)")


Finished = Returned[T] | Raised
Late = Callable[[Finished[T]], None]


class _Call(Generic[T]):
    __slots__ = ("began_wall_ms", "done", "fn", "late", "outcome", "timeout_s", "what")

    def __init__(self, what: str, fn: Callable[[], T], timeout_s: float,
                 began_wall_ms: int) -> None:
        self.what = what
        self.fn = fn
        self.timeout_s = timeout_s
        self.began_wall_ms = began_wall_ms
        self.done = threading.Event()
        self.outcome: Finished[T] | None = None
        self.late: Late[T] | None = None  # set when the waiter abandons the call


class DestinationCalls:
    """One destination's calls (module docstring). Thread-safe: any thread may ``run``;
    calls are made one at a time, in the order they were handed over."""

    def __init__(self, name: str, clock: Clock, *, events: EventLog = null_event_log) -> None:
        self.name = name
        self._clock = clock
        self._events = events
        self._lock = threading.Lock()
        self._current: _Call[Any] | None = None  # handed over, not yet returned
        self._calls: queue.SimpleQueue[_Call[Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def busy(self) -> Busy | None:
        """The abandoned call that still holds the destination, if one does."""
        with self._lock:
            current = self._current
            if current is None or current.late is None:
                return None
            return Busy(current.what, current.began_wall_ms, current.timeout_s)

    def run(self, what: str, fn: Callable[[], T], timeout_s: float,
            late: Late[T] | None = None) -> Finished[T] | Overdue | Busy | Closed:
        """Call ``fn`` on the destination's thread and wait for it up to ``timeout_s`` on
        the Clock. ``late`` gets the outcome of a call that returns after its deadline."""
        call: _Call[T] = _Call(what, fn, timeout_s, self._clock.wall_ms())
        with self._lock:
            current = self._current
            if current is not None:  # only an abandoned call can still be running here
                return Busy(current.what, current.began_wall_ms, current.timeout_s)
            if self._closed:
                return Closed(self.name)
            self._current = call
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name,
                                                daemon=True)
                self._thread.start()
        self._calls.put(call)
        self._clock.wait(call.done, timeout_s)
        with self._lock:
            if call.outcome is not None:
                return call.outcome
            call.late = late if late is not None else _ignore
            return Overdue(what, call.began_wall_ms, timeout_s)

    def close(self) -> None:
        """End the thread once the call in progress, if any, has returned."""
        with self._lock:
            self._closed = True
            started = self._thread is not None
        if started:
            self._calls.put(None)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            outcome: Finished[Any]
            try:
                outcome = Returned(call.fn())
            except BaseException as exc:  # whatever it raised is the caller's to judge
                outcome = Raised(exc)
            with self._lock:
                call.outcome = outcome
                self._current = None
                late = call.late
                call.done.set()
            if late is not None:
                try:
                    late(outcome)
                except Exception as exc:  # the thread must outlive a faulty callback
                    safe_event(self._events, "destination_late_answer_failed",
                               level="error", caller=self.name,
                               error=f"{type(exc).__name__}: {exc}")


def _ignore(outcome: Finished[T]) -> None:
    """What becomes of a late answer nobody asked for."""


class DeadlineScans:
    """A destination as the evidence scanner sees it: each ``scan_evidence`` runs on a
    thread of its own (``DestinationCalls``, apart from the publishes, which it never
    waits behind) and is waited for at most ``timeout_s``. A scan that has not answered
    by then raises ``TimeoutError``, and so does the next while it still hangs: the scanner
    records the error for those attempts and looks at every other lane as usual, instead
    of hanging on one destination. ``close`` ends the scan thread (the destination itself is
    closed by its owner); the other calls are the destination's own."""

    def __init__(self, destination: Destination, clock: Clock, *, timeout_s: float,
                 events: EventLog = null_event_log) -> None:
        self.destination = destination
        self.name = destination.name
        self.max_record_bytes = destination.max_record_bytes
        self.timeout_s = timeout_s
        self.calls = DestinationCalls(f"evidence-{destination.name}", clock, events=events)

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        return self.destination.publish(requests, now_ms)

    def probe(self) -> str | None:
        return self.destination.probe()

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        outcome = self.calls.run(
            "evidence scan",
            lambda: self.destination.scan_evidence(wanted, since_ms, until_ms),
            self.timeout_s)
        if isinstance(outcome, Returned):
            return outcome.value
        if isinstance(outcome, Raised):
            raise outcome.error
        raise TimeoutError(outcome.describe())

    def close(self) -> None:
        self.calls.close()
