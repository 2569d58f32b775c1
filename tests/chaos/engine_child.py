"""The real engine daemon with two test seams, for the chaos nemeses.

``python -m tests.chaos.engine_child --home H --control FILE`` runs
``nereus.engine.hosting.daemon.main`` — the same process ``nereus engine start`` starts — after
two patches that only this test process makes (the product has no such hooks):

* the engine's wall clock (``SystemClock.wall_ms``, which the Trusted UTC clock, the
  publishers and the file Shard Log's broker time read) is this host's clock plus the
  control file's ``clock_offset_ms``, so a nemesis steps it while the engine runs, as
  ``tests/integration/test_clock_step_status.py`` does with a ``FakeClock`` in-process;
* every lane's destination is wrapped by ``FaultyDestination``, which does what the
  control file says for its lane (``tests.chaos.control``), as the doubles of
  ``tests/integration/test_claim_paths.py`` do in-process.

With no control file (or an empty one) the process is the plain daemon.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from nereus.adapters.backends.destination.protocol import Destination, PublishRequest, PublishResult
from nereus.config import LaneSettings
from nereus.evidence_mac import ExpectedMac
from nereus.records import Disposition, Outcome
from tests.chaos.control import ControlReader

HANG_POLL_S = 0.05


class FaultyDestination:
    """A destination that obeys the control file's fault for its lane."""

    def __init__(self, inner: Destination, control: ControlReader) -> None:
        self.inner = inner
        self.name = self.inner.name
        self.max_record_bytes = self.inner.max_record_bytes
        self._control = control

    def _fault(self) -> str | None:
        return self._control.get().lanes.get(self.name)

    def _hang(self) -> None:
        while self._fault() == "hang":
            time.sleep(HANG_POLL_S)

    def probe(self) -> str | None:
        fault = self._fault()
        if fault == "refuse":
            return f"chaos: destination {self.name} refuses"
        if fault == "hang":
            self._hang()
        return self.inner.probe()

    def publish(self, requests: Sequence[PublishRequest],
                now_ms: Callable[[], int]) -> list[PublishResult]:
        fault = self._fault()
        if fault == "refuse":
            return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED, Disposition.RETRIABLE,
                                  f"chaos: {self.name} refused before any write")
                    for r in requests]
        if fault == "slow":
            time.sleep(self._control.get().slow_ms / 1000)
        if fault == "hang":
            self._hang()
        results = self.inner.publish(requests, now_ms)
        if fault == "fail_after_write":
            raise ConnectionResetError(f"chaos: {self.name}'s answer was lost after the write")
        return list(results)

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        if self._fault() == "hang":
            self._hang()
        return self.inner.scan_evidence(wanted, since_ms, until_ms)

    def close(self) -> None:
        self.inner.close()


def install(control_path: Path) -> None:
    """Patch the engine's wall clock and destinations to obey ``control_path``."""
    import nereus.engine.process.home_engine as engine_module
    from nereus.adapters import time_source
    from nereus.adapters.backends.destination.factory import open_destination

    control = ControlReader(control_path)

    def wall_ms(self: object) -> int:
        return time.time_ns() // 1_000_000 + control.get().clock_offset_ms

    time_source.SystemClock.wall_ms = wall_ms  # type: ignore[method-assign]

    def faulty(lane: LaneSettings, home: Path) -> Destination:
        return FaultyDestination(open_destination(lane, home), control)

    setattr(engine_module, "open_destination", faulty)  # noqa: B010 - a test patch


def main() -> None:
    args = sys.argv[1:]
    if "--control" not in args:
        raise SystemExit("usage: python -m tests.chaos.engine_child --home H --control FILE")
    at = args.index("--control")
    control_path = Path(args[at + 1])
    del args[at:at + 2]
    install(control_path)
    from nereus.engine.hosting.daemon import main as daemon_main

    sys.argv = ["nereus-engine", *args]
    daemon_main()


if __name__ == "__main__":
    main()
