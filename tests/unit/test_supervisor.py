"""Supervision: a crashed worker is logged with its traceback, counted and restarted."""

from __future__ import annotations

import threading

import pytest

from nereus.engine.runtime.event_log import RecordingEventLog
from nereus.engine.runtime.supervisor import Backoff, Supervisor, WorkerState
from tests.fake_clock import FakeClock
from tests.polling import wait_until

FAST = Backoff(initial_s=0.01, cap_s=0.05)


class Flaky:
    """A worker body that raises on its first ``failures`` calls, then runs until stopped."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.stop = threading.Event()
        self.ran = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"boom {self.calls}")
        self.ran.set()
        self.stop.wait()


def test_a_crashed_worker_is_restarted_and_reported() -> None:
    """Two crashes: two restarts, the last error kept, each logged with its traceback."""
    events = RecordingEventLog()
    supervisor = Supervisor(events, FAST)
    body = Flaky(failures=2)
    worker = supervisor.spawn("flaky", "test", body)
    assert body.ran.wait(5)
    status = worker.status()
    assert status.state == WorkerState.RUNNING
    assert status.restarts == 2
    assert status.last_error == "RuntimeError: boom 2"
    assert status.last_error_at_ms is not None
    crashes = events.named("worker_crashed")
    assert [c["error"] for c in crashes] == ["RuntimeError: boom 1", "RuntimeError: boom 2"]
    assert all("Traceback" in str(c["traceback"]) and "boom" in str(c["traceback"])
               for c in crashes)
    assert len(events.named("worker_restarted")) == 2
    body.stop.set()
    worker.stopping()
    assert worker.join(5)
    assert worker.status().state == WorkerState.STOPPED
    assert [s.name for s in supervisor.statuses()] == ["flaky"]


def test_a_fatal_error_is_not_restarted() -> None:
    """An error the owner declares fatal ends the worker FAILED, once."""
    supervisor = Supervisor(RecordingEventLog(), FAST)
    calls: list[int] = []

    def body() -> None:
        calls.append(1)
        raise KeyError("damaged")

    worker = supervisor.spawn("doomed", "test", body, fatal=(KeyError,))
    assert worker.join(5)
    assert calls == [1]
    assert worker.status().state == WorkerState.FAILED
    assert worker.status().restarts == 0


def test_stopping_cuts_a_backoff_short_and_runs_the_body_once_more() -> None:
    """A worker in a long backoff is woken by stopping() and winds down, not restarted again."""
    supervisor = Supervisor(RecordingEventLog(), Backoff(initial_s=60, cap_s=60))
    calls: list[int] = []

    def body() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first run fails")

    worker = supervisor.spawn("slow", "test", body)
    wait_until("backoff", lambda: worker.status().state == WorkerState.BACKOFF, 5)
    worker.stopping()
    assert worker.join(5)
    assert len(calls) == 2
    assert worker.status().state == WorkerState.STOPPED


def test_backoff_grows_and_is_capped() -> None:
    """The delay doubles per consecutive crash up to its cap."""
    backoff = Backoff(initial_s=0.1, cap_s=1.0)
    assert [backoff.delay_s(n) for n in (1, 2, 3, 4, 5, 6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


@pytest.mark.timeout(30)
def test_a_restart_backoff_passes_on_the_clock_not_in_real_time() -> None:
    """A one-minute backoff on a FakeClock: the worker stays in BACKOFF, waiting on the
    clock, until the clock is advanced a minute; then it runs again at once. The crash is
    stamped with the clock's wall time."""
    clock = FakeClock(wall_ms=42_000)
    supervisor = Supervisor(RecordingEventLog(), Backoff(initial_s=60, cap_s=60), clock=clock)
    body = Flaky(failures=1)
    worker = supervisor.spawn("flaky", "test", body)
    wait_until("the worker's backoff on the clock", lambda: clock.waiters == 1, 5)
    assert worker.status().state == WorkerState.BACKOFF
    assert worker.status().last_error_at_ms == 42_000
    clock.advance(59.999)
    assert worker.status().state == WorkerState.BACKOFF and body.calls == 1
    clock.advance(0.001)
    assert body.ran.wait(5)
    assert body.calls == 2 and worker.status().restarts == 1
    body.stop.set()
    worker.stopping()
    assert worker.join(5)


class Same:
    """A worker body that raises the same error on every call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        raise FileNotFoundError("segment 00000000000000000000.seg is gone")


@pytest.mark.timeout(30)
def test_a_crash_that_repeats_is_logged_once_a_minute_not_every_restart() -> None:
    """A body failing the same way every 5 s: the first crash is logged at error with its
    traceback; the next ones within a minute are counted, not logged (nor their restarts);
    the first after a minute is one line without the traceback saying how many repeated.
    The status still counts every restart."""
    clock = FakeClock(wall_ms=0)
    events = RecordingEventLog()
    supervisor = Supervisor(events, Backoff(initial_s=5, cap_s=5), clock=clock)
    body = Same()
    worker = supervisor.spawn("shard-default/0", "shard", body)
    for calls in range(1, 14):  # 13 crashes, 5 s apart: 0 s .. 60 s
        wait_until(f"crash {calls} in its backoff",
                   lambda: clock.waiters == 1 and body.calls == calls, 5)  # noqa: B023
        if calls < 13:  # the last one stays in its backoff: nothing runs after the asserts
            clock.advance(5)
    crashes = events.named("worker_crashed")
    assert len(crashes) == 2, crashes
    assert crashes[0]["level"] == "error" and "Traceback" in str(crashes[0]["traceback"])
    assert crashes[1]["repeated"] == 11 and "traceback" not in crashes[1]
    assert len(events.named("worker_restarted")) == 1
    assert worker.status().restarts == 13
    worker.stopping()
    assert worker.join(5)
