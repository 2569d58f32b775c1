"""Destination calls under deadlines (``engine/publishing/destination_calls.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.engine.publishing.destination_calls import (
    Busy,
    Closed,
    DeadlineScans,
    DestinationCalls,
    Finished,
    Overdue,
    Returned,
)
from nereus.evidence_mac import ExpectedMac
from tests.fake_clock import FakeClock
from tests.integration.doubles import QuietDestination
from tests.polling import wait_until


@pytest.mark.timeout(30)
def test_an_overdue_call_is_abandoned_and_its_late_answer_handed_on() -> None:
    """A call still running at its deadline (FakeClock) is Overdue; while it runs the next
    call is Busy at once and never started; when it returns, its answer goes to the late
    callback, and the next call runs as usual."""
    clock = FakeClock(wall_ms=1_000)
    calls = DestinationCalls("destination-x", clock)
    release = threading.Event()
    late: list[Finished[str]] = []
    waited: list[object] = []

    def slow() -> str:
        release.wait(20)
        return "sent"

    waiter = threading.Thread(target=lambda: waited.append(
        calls.run("publish", slow, 5.0, late=late.append)))
    waiter.start()
    wait_until("the caller waiting", lambda: clock.waiters == 1, 5)
    clock.advance(5)
    waiter.join(5)
    assert waited == [Overdue("publish", 1_000, 5.0)]
    started: list[str] = []

    def probe() -> str:
        started.append("probe")
        return "ok"

    busy = calls.run("probe", probe, 5.0)
    assert isinstance(busy, Busy) and started == []
    assert "has not answered a publish begun at" in busy.describe()
    release.set()
    wait_until("the late answer", lambda: late == [Returned("sent")], 5)
    assert calls.run("probe", lambda: "ok", 5.0) == Returned("ok")
    calls.close()
    assert isinstance(calls.run("probe", lambda: "ok", 5.0), Closed)


class HangingScan(QuietDestination):
    """A destination whose evidence scan blocks until ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        return []

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        self.release.wait(20)
        return dict.fromkeys(wanted, "found")


@pytest.mark.timeout(30)
def test_an_evidence_scan_that_hangs_is_an_error_not_a_stuck_scanner() -> None:
    """The evidence scanner's view of a destination whose scan hangs: the scan raises
    TimeoutError at its deadline, the next raises at once while the first still hangs,
    and once it has returned, scans answer again."""
    clock = FakeClock()
    destination = HangingScan()
    scans = DeadlineScans(destination, clock, timeout_s=30)
    errors: list[BaseException] = []

    def scan() -> None:
        try:
            scans.scan_evidence({"a1": "mac"}, 0, 1)
        except TimeoutError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=scan)
    waiter.start()
    wait_until("the scan waiting", lambda: clock.waiters == 1, 5)
    clock.advance(30)
    waiter.join(5)
    assert len(errors) == 1 and "evidence scan" in str(errors[0])
    with pytest.raises(TimeoutError, match=r"has not answered an? evidence scan"):
        scans.scan_evidence({"a2": "mac"}, 0, 1)
    destination.release.set()
    wait_until("the hung scan to return", lambda: scans.calls.busy() is None, 5)
    assert scans.scan_evidence({"a3": "mac"}, 0, 1) == {"a3": "found"}
    scans.close()
