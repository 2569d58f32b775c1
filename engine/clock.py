"""The engine's Trusted UTC clock: the system clock widened by a maximum error.

``TrustedClock.now()`` returns a ``TrustedTime`` interval that contains the true time as
long as the system clock is within ``max_error_ms`` of it (add chrony's own estimate when
available). Two guards make clock steps safe:

* a **backwards** step never moves ``earliest`` back and keeps ``latest`` where real
  elapsed time (the monotonic clock) says it must be at least: the interval widens, so
  nothing is decided on the strength of the stepped reading;
* a **forwards** step cannot advance ``earliest`` faster than the monotonic clock, so a
  clock that jumps ahead cannot make work due early.

Readers are injectable (``wall_ms``, ``mono_ms``) so tests can skew and step the clock.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable

from nereus.trusted_time import TrustedTime


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def chrony_error_ms(csv_line: str) -> int | None:
    """The error bound in `chronyc -c tracking` output: |offset| + root delay/2 + dispersion."""
    fields = csv_line.strip().split(",")
    if len(fields) < 12:
        return None
    try:
        offset = abs(float(fields[4]))
        root_delay = float(fields[10])
        root_dispersion = float(fields[11])
    except ValueError:
        return None
    return int((offset + root_delay / 2 + root_dispersion) * 1000) + 1


def read_chrony_error_ms(timeout_s: float = 1.0) -> int | None:
    """Ask chronyd for its error bound; None when chrony is not there or not synchronised."""
    chronyc = shutil.which("chronyc")
    if chronyc is None:
        return None
    try:
        out = subprocess.run([chronyc, "-c", "tracking"], capture_output=True, text=True,
                             timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return chrony_error_ms(out.stdout) if out.returncode == 0 else None


class TrustedClock:
    """Trusted UTC intervals from a wall clock, a monotonic clock and an error bound."""

    def __init__(
        self,
        *,
        max_error_ms: int = 50,
        wall_ms: Callable[[], int] = _wall_ms,
        mono_ms: Callable[[], int] = _mono_ms,
        extra_error_ms: Callable[[], int | None] | None = None,
    ) -> None:
        self.max_error_ms = max_error_ms
        self._wall = wall_ms
        self._mono = mono_ms
        self._extra = extra_error_ms
        self._last: tuple[int, int, int] | None = None  # earliest, latest, mono
        self._lock = threading.Lock()
        self.steps_backwards = 0

    def now(self) -> TrustedTime:
        error = self.max_error_ms + ((self._extra() or 0) if self._extra else 0)
        with self._lock:
            wall, mono = self._wall(), self._mono()
            earliest, latest = wall - error, wall + error
            if self._last is not None:
                last_earliest, last_latest, last_mono = self._last
                elapsed = max(mono - last_mono, 0)
                if wall - error < last_earliest:
                    self.steps_backwards += 1
                earliest = max(min(earliest, last_earliest + elapsed), last_earliest)
                latest = max(latest, last_latest + elapsed)
            self._last = (earliest, latest, mono)
            return TrustedTime(earliest, latest)

    def wall_ms(self) -> int:
        return self._wall()


class ChronyErrorSource:
    """chrony's current error bound, refreshed in the background (never on a hot path)."""

    def __init__(self, interval_s: float = 30.0) -> None:
        self.interval_s = interval_s
        self.value: int | None = read_chrony_error_ms()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chrony", daemon=True)
        self._thread.start()

    def __call__(self) -> int | None:
        return self.value

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.value = read_chrony_error_ms()

    def close(self) -> None:
        self._stop.set()
