"""The small runs the chaos tests make: a few dozen operations over a few seconds, each
nemesis injected at least once, then quiescence, the final state and the check.

A test asserts what a run must show to count — the nemesis really injected faults, the
workload really ran, the consumers really read — and then that no invariant was broken;
on failure it prints the run's summary with every violation and the history lines that
prove it (the history file stays in the test's ``tmp_path``)."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.homes import Brokers
from tests.chaos.runner import RunBackend, RunReport, RunSpec, run_chaos

SMALL_OPS = 36
SMALL_DURATION_S = 6.0


def small_run(tmp_path: Path, backend: RunBackend, *nemeses: str, brokers: Brokers | None = None,
              seed: int = 37, replay: bool = False, lateness_bound_ms: int = 10_000,
              hold_s: tuple[float, float] = (1.0, 2.5), ops: int = SMALL_OPS,
              duration_s: float = SMALL_DURATION_S, operator: bool = True,
              feature_level: int = 1) -> RunReport:
    spec = RunSpec(seed=seed, ops=ops, duration_s=duration_s, backend=backend,
                   nemeses=nemeses, quiesce_s=45.0, lateness_bound_ms=lateness_bound_ms,
                   pause_s=(0.3, 1.0), hold_s=hold_s, replay=replay, operator=operator,
                   feature_level=feature_level)
    return run_chaos(spec, tmp_path / "chaos", brokers or Brokers())


def assert_clean(report: RunReport, *, min_faults: int = 1) -> None:
    """The run did what it was for, and broke no invariant."""
    assert report.faults >= min_faults, f"no fault was injected: {report.summary()}"
    assert report.operations >= SMALL_OPS // 2, report.summary()
    assert report.seen > 0, f"no consumer read anything: {report.summary()}"
    assert report.quiesced, report.summary()
    assert report.violations == [], report.summary()
