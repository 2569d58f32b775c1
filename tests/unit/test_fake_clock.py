"""The test clock itself: time moves only when told, and waiters follow it, not real time."""

from __future__ import annotations

import threading

import pytest

from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from tests.fake_clock import FakeClock, SkewedClock
from tests.polling import wait_until


def _in_thread(clock: FakeClock, event: threading.Event, timeout_s: float) -> list[bool]:
    """Start ``clock.wait(event, timeout_s)`` on a thread; its answer lands in the list."""
    answers: list[bool] = []
    threading.Thread(target=lambda: answers.append(clock.wait(event, timeout_s)),
                     daemon=True).start()
    wait_until("the waiter on the clock", lambda: clock.waiters == 1, 5)
    return answers


def test_both_clocks_satisfy_the_protocol() -> None:
    """The engine's Protocol is met by the system clock and by both test clocks."""
    clocks: list[Clock] = [SYSTEM_CLOCK, FakeClock(), SkewedClock(lambda: 5)]
    assert all(isinstance(clock.wall_ms(), int) for clock in clocks)


def test_advance_moves_wall_and_monotonic_together_and_step_moves_wall_alone() -> None:
    """advance(s) adds s to both readings; step_wall(ms) moves only the wall, either way."""
    clock = FakeClock(wall_ms=5_000, monotonic_s=10.0)
    clock.advance(1.5)
    assert (clock.wall_ms(), clock.monotonic(), clock.monotonic_ms()) == (6_500, 11.5, 11_500)
    clock.step_wall(-2_000)
    assert (clock.wall_ms(), clock.monotonic_ms()) == (4_500, 11_500)
    with pytest.raises(ValueError, match="does not go back"):
        clock.advance(-1)


@pytest.mark.timeout(20)
def test_a_wait_ends_when_the_clock_is_advanced_to_its_deadline() -> None:
    """An hour-long wait is still blocked after advance(3599) and ends right after
    advance(1) more: real time plays no part."""
    clock = FakeClock()
    answers = _in_thread(clock, threading.Event(), 3600)
    clock.advance(3599)
    assert answers == [] and clock.waiters == 1
    clock.advance(1)
    wait_until("the wait to end", lambda: answers, 5)
    assert answers == [False] and clock.waiters == 0


@pytest.mark.timeout(20)
def test_a_wait_ends_at_once_when_its_event_is_set() -> None:
    """Setting the event ends the wait (True) whatever the clock says."""
    clock = FakeClock()
    event = threading.Event()
    answers = _in_thread(clock, event, 3600)
    event.set()
    wait_until("the wait to end", lambda: answers, 5)
    assert answers == [True]


@pytest.mark.timeout(20)
def test_autojump_moves_a_still_clock_to_the_earliest_deadline() -> None:
    """With autojump, a clock nobody moves jumps to the earliest waiter's deadline: an
    hour passes in about the threshold of real time, and exactly one hour."""
    clock = FakeClock(monotonic_s=0.0, autojump_threshold_s=0.05)
    answers = _in_thread(clock, threading.Event(), 3600)
    wait_until("the autojump", lambda: answers, 5)
    assert answers == [False] and clock.monotonic() == 3600.0


@pytest.mark.timeout(20)
def test_sleep_returns_only_after_the_clock_has_moved() -> None:
    """sleep(s) is a wait nothing can cut short but the clock."""
    clock = FakeClock()
    done = threading.Event()

    def sleeper() -> None:
        clock.sleep(30)
        done.set()

    threading.Thread(target=sleeper, daemon=True).start()
    wait_until("the sleeper", lambda: clock.waiters == 1, 5)
    assert not done.is_set()
    clock.advance(30)
    assert done.wait(5)
