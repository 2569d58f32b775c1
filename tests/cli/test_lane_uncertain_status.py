"""A lane says how many of its attempts are UNCERTAIN, how old the oldest is and how it
fences a dead owner's sends: in ``engine status`` (JSON and text), ``lane list`` and the
metrics. The UNKNOWN attempts are made as production makes them (``tests/uncertain.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt


@pytest.mark.timeout(120)
def test_engine_status_and_metrics_show_a_lanes_uncertain_attempts(tmp_path: Path) -> None:
    """Two UNKNOWN attempts on lane local: status and lane list say 2 UNCERTAIN with the
    oldest's age and fencing 'file writer lock'; the text names them and the playbook; the
    metrics carry the oldest age and the fenced flag."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "1", home=home).code == 0
    for n in range(2):
        make_unknown_attempt(home, f"stuck-{n}", f"ghost-{n}")
    with running_engine(home):
        def local() -> dict[str, object] | None:
            status = run_nereus("--json", "engine", "status", home=home).json()
            lane: dict[str, object] = status["lanes"][0]
            return lane if lane["uncertain"] == 2 else None

        wait_until("two UNCERTAIN attempts on lane local", lambda: local() is not None, 30)
        lane = local()
        assert lane is not None
        assert lane["fencing"] == "file writer lock"
        age = lane["uncertain_oldest_age_ms"]
        assert isinstance(age, int) and 0 <= age < 120_000
        listed = run_nereus("--json", "lane", "list", home=home).json()[0]
        assert listed["uncertain"] == 2
        text = run_nereus("engine", "status", home=home).stdout
        assert "local: 2 attempt(s) UNCERTAIN" in text and "settle-lane-uncertain" in text
        exposition = run_nereus("metrics", home=home).stdout
        assert 'nereus_lane_fenced{lane="local"} 1.0' in exposition
        assert 'nereus_uncertain_oldest_age_seconds{lane="local"}' in exposition
