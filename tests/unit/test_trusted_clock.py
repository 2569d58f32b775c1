"""Trusted UTC: intervals, decisions, and what clock steps do to them."""

from __future__ import annotations

import time

import pytest

from nereus.adapters.time_source import BOOT_CLOCK, SystemClock
from nereus.engine.runtime.trusted_clock import (
    ClockReport,
    TrustedClock,
    chrony_error_ms,
    chrony_report,
)
from nereus.trusted_time import TrustedTime
from tests.fake_clock import FakeClock


def make(clocks: FakeClock, error: int = 50) -> TrustedClock:
    return TrustedClock(max_error_ms=error, source=clocks)


def test_decisions_use_the_safe_bound() -> None:
    """Due needs earliest >= actionAt; expired needs earliest > expireAt; admission latest."""
    t = TrustedTime(1_000, 1_100)
    assert t.is_due(1_000) and not t.is_due(1_001)
    assert t.has_expired(999) and not t.has_expired(1_000) and not t.has_expired(None)
    assert t.expiry_open(1_100) and not t.expiry_open(1_099) and t.expiry_open(None)


def test_interval_is_the_reading_plus_minus_the_error() -> None:
    """A steady clock gives [wall - error, wall + error]."""
    clocks = FakeClock(wall_ms=10_000)
    clock = make(clocks)
    assert clock.now() == TrustedTime(9_950, 10_050)
    clocks.advance(0.1)
    assert clock.now() == TrustedTime(10_050, 10_150)


def test_a_backwards_step_widens_instead_of_going_back() -> None:
    """After the wall clock steps back 5 s, earliest does not move back and latest keeps pace."""
    clocks = FakeClock(wall_ms=10_000)
    clock = make(clocks)
    clock.now()
    clocks.advance(0.1)
    clocks.step_wall(-5_100)
    t = clock.now()
    assert t.earliest_ms == 9_950  # held, not 4_950
    assert t.latest_ms == 10_150  # where real elapsed time says it is at least
    assert clock.steps_backwards == 1


def test_a_forwards_jump_cannot_make_work_due_early() -> None:
    """If the wall clock jumps 10 s ahead in 100 ms, earliest advances only 100 ms."""
    clocks = FakeClock(wall_ms=10_000)
    clock = make(clocks)
    clock.now()
    clocks.advance(0.1)
    clocks.step_wall(9_900)
    t = clock.now()
    assert t.earliest_ms == 10_050
    assert not t.is_due(20_000)


def test_a_forwards_step_is_held_back_and_said_until_a_restart() -> None:
    """After a 10 s step forwards, earliest stays that far behind the wall reading however
    long the engine runs (``held_back_ms``), and ``held_back`` says why decisions are late;
    a fresh clock (a restart) reads the wall clock as it is."""
    clocks = FakeClock(wall_ms=10_000)
    clock = make(clocks)
    clock.now()
    assert clock.held_back_ms == 0 and clock.held_back() is None
    clocks.step_wall(10_000)
    clocks.advance(3_600)
    t = clock.now()
    assert t.earliest_ms == 10_000 - 50 + 3_600_000
    assert clock.held_back_ms == 10_000
    said = clock.held_back()
    assert said is not None and "stepped forwards by about 10,000 ms" in said
    assert "restart the engine" in said
    restarted = make(clocks)
    assert restarted.now().earliest_ms == clocks.wall_ms() - 50
    assert restarted.held_back_ms == 0


def test_a_step_within_the_error_bound_is_not_a_problem() -> None:
    """A step forwards no larger than max_error_ms is held back but not reported; a step
    backwards holds nothing back."""
    clocks = FakeClock(wall_ms=10_000)
    clock = make(clocks)
    clock.now()
    clocks.step_wall(50)
    clock.now()
    assert clock.held_back_ms == 50 and clock.held_back() is None
    clocks.step_wall(-5_000)
    clock.now()
    assert clock.held_back_ms == 0


@pytest.mark.skipif(BOOT_CLOCK is None, reason="no CLOCK_BOOTTIME on this platform")
def test_a_suspended_host_is_not_a_step_forwards(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system Clock's monotonic reading counts time spent suspended (CLOCK_BOOTTIME):
    after ten minutes suspended, when the wall and boot clocks moved on and CLOCK_MONOTONIC
    did not, Trusted UTC follows the wall clock and holds nothing back."""
    readings = {"wall": 1_700_000_000_000_000_000, "boot": 5_000_000_000,
                "monotonic": 4_000_000_000}
    monkeypatch.setattr(time, "time_ns", lambda: readings["wall"])
    monkeypatch.setattr(time, "monotonic_ns", lambda: readings["monotonic"])
    monkeypatch.setattr(time, "clock_gettime_ns",
                        lambda clock: readings["boot"] if clock == BOOT_CLOCK else 0)
    clock = TrustedClock(max_error_ms=50, source=SystemClock())
    before = clock.now()
    readings["wall"] += 600 * 10**9
    readings["boot"] += 600 * 10**9
    after = clock.now()
    assert after.earliest_ms - before.earliest_ms == 600_000
    assert clock.held_back_ms == 0 and clock.held_back() is None


def test_chrony_tracking_line_gives_an_error_bound() -> None:
    """`chronyc -c tracking`: |offset| + root delay / 2 + root dispersion, in ms (rounded up)."""
    line = ("A29FC87B,162.159.200.123,3,1700000000.0,-0.000120,0.000010,0.000200,"
            "-12.3,0.001,0.02,0.010000,0.002000,64.0,Normal")
    assert chrony_error_ms(line) == int((0.000120 + 0.005 + 0.002) * 1000) + 1
    assert chrony_error_ms("garbage") is None


def test_extra_error_source_widens_the_interval() -> None:
    """An extra error estimate (e.g. chrony's) is added to the configured bound."""
    clocks = FakeClock(wall_ms=10_000)
    clock = TrustedClock(max_error_ms=10, source=clocks, health=lambda: ClockReport(40))
    assert clock.now() == TrustedTime(9_950, 10_050)


TRACKING = ("A29FC87B,162.159.200.123,3,1700000000.0,-0.000120,0.000010,0.000200,"
            "-12.3,0.001,0.02,0.010000,0.002000,64.0,{leap}")


def test_chrony_trust_follows_its_leap_status() -> None:
    """Normal: trusted, with its error bound. Not synchronised, or a leap second pending:
    not trusted, saying why. An unreadable report is not trusted either."""
    ok = chrony_report(TRACKING.format(leap="Normal"))
    assert ok.problem is None and ok.error_ms == 8
    unsynced = chrony_report(TRACKING.format(leap="Not synchronised"))
    assert unsynced.problem is not None and "not synchronised" in unsynced.problem
    for leap in ("Insert second", "Delete second"):
        pending = chrony_report(TRACKING.format(leap=leap))
        assert pending.problem is not None and "leap second" in pending.problem
    assert chrony_report("506C,1,2").problem is not None


def test_the_clock_reports_the_problem_of_its_time_source() -> None:
    """problem() is the health source's; a plain clock has none."""
    clocks = FakeClock(wall_ms=10_000)
    assert make(clocks).problem() is None
    untrusted = TrustedClock(source=clocks,
                             health=lambda: ClockReport(5, "chrony reports the clock is not "
                                                           "synchronised"))
    assert untrusted.problem() == "chrony reports the clock is not synchronised"


def test_a_floor_keeps_the_first_readings_from_going_back() -> None:
    """A restarted owner whose wall clock is a minute behind the last applied decision
    reads no earlier than that decision, and time still moves forward from there."""
    clocks = FakeClock(wall_ms=100_000)
    clock = make(clocks, error=50)
    clock.raise_floor(160_000)
    first = clock.now()
    assert first.earliest_ms == 160_000 and first.latest_ms >= first.earliest_ms
    clocks.advance(1)
    assert clock.now().earliest_ms >= 160_000
    fresh = make(FakeClock(wall_ms=500_000))
    fresh.raise_floor(1_000)  # a floor below the reading changes nothing
    assert fresh.now().earliest_ms == 499_950


class _Source:
    """A time source (chrony) whose verdict a test changes."""

    def __init__(self) -> None:
        self.report = ClockReport(0)

    def __call__(self) -> ClockReport:
        return self.report

    def distrust(self) -> None:
        self.report = ClockReport(0, "chrony reports the clock is not synchronised")

    def trust(self) -> None:
        self.report = ClockReport(0)


def test_a_step_made_while_chrony_distrusts_the_clock_is_read_once_it_trusts_it() -> None:
    """chrony says the clock is not synchronised (no decision is made), the clock steps
    10 s forwards (chrony's own step at boot), then chrony says it is synchronised: the
    next reading is the wall clock as it is, not held 10 s back until a restart."""
    clocks, source = FakeClock(wall_ms=10_000), _Source()
    clock = TrustedClock(max_error_ms=50, source=clocks, health=source)
    clock.now()
    source.distrust()
    assert clock.problem() is not None  # a round asks, and makes no decision
    clocks.step_wall(10_000)
    clocks.advance(1)
    source.trust()
    assert clock.now().earliest_ms == clocks.wall_ms() - 50
    assert clock.held_back_ms == 0 and clock.held_back() is None


def test_a_step_made_while_chrony_trusts_the_clock_is_held_back() -> None:
    """With chrony saying "Normal" throughout (a step by hand, which chronyd notices only at
    its next measurement), a 10 s step forwards is held back as without chrony; a reading
    taken while chrony distrusts the clock is held back too (the interval it gives is not
    a decision, but a round that asked just before may still use it)."""
    clocks, source = FakeClock(wall_ms=10_000), _Source()
    clock = TrustedClock(max_error_ms=50, source=clocks, health=source)
    clock.now()
    clocks.step_wall(10_000)
    clocks.advance(1)
    assert clock.now().earliest_ms == 10_000 - 50 + 1_000
    assert clock.held_back_ms == 10_000
    source.distrust()
    clocks.advance(1)
    assert clock.now().earliest_ms == 10_000 - 50 + 2_000


def test_earliest_never_moves_back_across_a_distrusted_period() -> None:
    """The clock steps 5 s back while chrony distrusts it: once trusted again, earliest
    stays where it was (the wall clock is read as it is only when that is later)."""
    clocks, source = FakeClock(wall_ms=10_000), _Source()
    clock = TrustedClock(max_error_ms=50, source=clocks, health=source)
    before = clock.now().earliest_ms
    source.distrust()
    clock.now()  # a reading while distrusted counts as the source's verdict too
    clocks.step_wall(-5_000)
    source.trust()
    assert clock.now().earliest_ms == before
