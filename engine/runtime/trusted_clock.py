"""The engine's Trusted UTC clock: the system clock widened by a maximum error.

``TrustedClock.now()`` returns a ``TrustedTime`` interval containing the true time while the
system clock is within ``max_error_ms`` (plus chrony's estimate) of it. A backwards step
never moves ``earliest`` back and widens the interval; a forwards step cannot advance
``earliest`` faster than the monotonic clock and is never trusted later either: decisions
wait as long (``held_back_ms``; a problem ``engine status`` lists) until a restart, or
until chrony has said the clock is untrustworthy and then trustworthy again. Why never at a
bounded rate: ``docs/decisions/0013-clock-steps-never-trusted.md``. With ``[engine] chrony
= true`` the clock is trusted only while chrony says synchronised and no leap second is
pending (``problem()``); ``raise_floor`` keeps readings after a start from going back past
the last applied decision. Readings come from ``time_source.Clock``, so tests step it.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from nereus.adapters.time_source import SYSTEM_CLOCK, Clock
from nereus.trusted_time import TrustedTime


@dataclass(frozen=True, slots=True)
class ClockReport:
    """What an external time source says: its extra error bound, and whether the clock can
    be trusted at all (``problem``: why not; admissions stop while it is set)."""

    error_ms: int = 0
    problem: str | None = None


class ClockHealth(Protocol):
    """An external time source asked on every reading (it must answer at once)."""

    def __call__(self) -> ClockReport: ...


# chronyc -c tracking, field 13 (0-based): the leap status
_LEAP_OK = "Normal"


def chrony_report(csv_line: str) -> ClockReport:
    """The error bound and trust of a `chronyc -c tracking` line.

    Error: |offset| + root delay / 2 + root dispersion. Not trusted when chrony says the
    clock is not synchronised, or a leap second is pending (the step at midnight can repeat
    or skip a second of wall-clock readings).
    """
    fields = csv_line.strip().split(",")
    if len(fields) < 14:
        return ClockReport(0, f"chrony's tracking report is unreadable: {csv_line.strip()!r}")
    try:
        offset = abs(float(fields[4]))
        root_delay = float(fields[10])
        root_dispersion = float(fields[11])
    except ValueError:
        return ClockReport(0, f"chrony's tracking report is unreadable: {csv_line.strip()!r}")
    error = int((offset + root_delay / 2 + root_dispersion) * 1000) + 1
    leap = fields[13].strip()
    if leap == _LEAP_OK:
        return ClockReport(error)
    if leap.lower().startswith("not sync"):
        return ClockReport(error, "chrony reports the clock is not synchronised")
    return ClockReport(error, f"chrony reports a pending leap second ({leap})")


def chrony_error_ms(csv_line: str) -> int | None:
    """The error bound in `chronyc -c tracking` output (None when it is unreadable)."""
    report = chrony_report(csv_line)
    return None if report.problem and "unreadable" in report.problem else report.error_ms


def read_chrony(timeout_s: float = 1.0) -> ClockReport:
    """Ask chronyd; a chrony that cannot be asked is a clock that cannot be trusted."""
    chronyc = shutil.which("chronyc")
    if chronyc is None:
        return ClockReport(0, "[engine] chrony = true, but chronyc is not installed")
    try:
        out = subprocess.run([chronyc, "-c", "tracking"], capture_output=True, text=True,
                             timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ClockReport(0, f"chronyc tracking did not answer: {exc}")
    if out.returncode != 0:
        return ClockReport(0, f"chronyc tracking failed: {(out.stderr or out.stdout).strip()}")
    return chrony_report(out.stdout)


class TrustedClock:
    """Trusted UTC intervals from a Clock's wall and monotonic readings and an error
    bound. ``source`` is the raw Clock every other reader of the engine shares."""

    def __init__(
        self,
        *,
        max_error_ms: int = 50,
        source: Clock = SYSTEM_CLOCK,
        health: ClockHealth | None = None,
    ) -> None:
        self.max_error_ms = max_error_ms
        self.source = source
        self._health = health
        self._last: tuple[int, int, int] | None = None  # earliest, latest, mono
        self._floor = 0  # true time is known to be at least this (raise_floor)
        self._lock = threading.Lock()
        self.steps_backwards = 0
        # the time source said the clock was not to be trusted since the last trusted
        # reading: the next trusted reading takes the wall clock as it is (module docstring)
        self._unvouched = False
        # how far the last reading's earliest was held behind the wall reading (a step
        # forwards while the engine ran; 0 otherwise)
        self.held_back_ms = 0

    def now(self) -> TrustedTime:
        report = self._health() if self._health else None
        error = self.max_error_ms + (report.error_ms if report else 0)
        with self._lock:
            wall, mono = self.source.wall_ms(), self.source.monotonic_ms()
            earliest, latest = wall - error, wall + error
            vouched = False  # a trusted reading after the source distrusted the clock
            if report is not None:
                if report.problem is not None:
                    self._unvouched = True
                elif self._unvouched:
                    self._unvouched, vouched = False, True
            if self._last is not None:
                last_earliest, last_latest, last_mono = self._last
                elapsed = max(mono - last_mono, 0)
                if wall - error < last_earliest:
                    self.steps_backwards += 1
                if not vouched:  # a step forwards is not trusted (module docstring)
                    earliest = min(earliest, last_earliest + elapsed)
                earliest = max(earliest, last_earliest)
                latest = max(latest, last_latest + elapsed)
            earliest, latest = max(earliest, self._floor), max(latest, self._floor)
            self.held_back_ms = max(wall - error - earliest, 0)
            self._last = (earliest, latest, mono)
            return TrustedTime(earliest, latest)

    def problem(self) -> str | None:
        """Why the clock may not be trusted for a decision right now, or None."""
        if self._health is None:
            return None
        problem = self._health().problem
        if problem is not None:
            with self._lock:
                self._unvouched = True
        return problem

    def held_back(self) -> str | None:
        """Why decisions are late, when the wall clock stepped forwards by more than
        ``max_error_ms`` while the engine ran (as of the last reading), or None."""
        held = self.held_back_ms
        if held <= self.max_error_ms:
            return None
        return (f"the wall clock stepped forwards by about {held:,} ms while the engine ran: "
                f"Trusted UTC is held that far behind it (a step ahead of the monotonic clock "
                f"is never trusted), so every admission and expiry waits that much longer; "
                f"once the wall clock is known to be right, restart the engine to trust it")

    def raise_floor(self, earliest_ms: int) -> None:
        """True time is known to be at least ``earliest_ms`` (an applied admission was
        decided with it): no later reading may be earlier, whatever the wall clock says
        after a restart. ``latest`` is raised with it, so the interval stays ordered."""
        with self._lock:
            self._floor = max(self._floor, earliest_ms)

    def wall_ms(self) -> int:
        """The raw wall reading (timestamps for logs and manifests; never a decision)."""
        return self.source.wall_ms()


class ChronyHealth:
    """chrony's error bound and trust, refreshed by a supervised worker (``run``) so a
    reading never waits for chronyc."""

    def __init__(self, interval_s: float = 10.0,
                 read: Callable[[], ClockReport] = read_chrony, *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.interval_s = interval_s
        self._read = read
        self._clock = clock
        self.report: ClockReport = read()
        self._stop = threading.Event()

    def __call__(self) -> ClockReport:
        return self.report

    def run(self) -> None:
        """Refresh until ``close`` (a supervised worker body)."""
        while not self._clock.wait(self._stop, self.interval_s):
            self.report = self._read()

    def close(self) -> None:
        self._stop.set()
