"""settle-lane-uncertain settles every UNKNOWN attempt of one lane in one run, each with
the evidence given (its own id, its message, the run id), after a dry run that shows each
command and changes nothing. The home's three UNKNOWN attempts are made as production
makes them (``tests/uncertain.py``: a dead owner's admissions, no outcome), on a home
whose outbox never had a writer lock, so no fence can prove them absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt

GHOSTS = [f"ghost-{n}" for n in range(3)]


def unknown(home: Path) -> list[str]:
    listed = run_nereus("--json", "attempt", "list", "--state", "unknown", home=home).json()
    return sorted(a["attempt_id"] for a in listed if a["lane"] == "local")


@pytest.mark.timeout(240)
def test_a_lanes_uncertain_attempts_are_settled_in_bulk_after_a_dry_run(tmp_path: Path) -> None:
    """The dry run lists one resolve per UNKNOWN attempt of the lane, each with its evidence,
    and settles nothing; the run settles all three (NOT_PUBLISHED, recorded unverified with
    that evidence and the reason), and the lane has no UNKNOWN attempt left."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "1", home=home).code == 0
    for n, ghost in enumerate(GHOSTS):
        make_unknown_attempt(home, f"stuck-{n}", ghost)
    variables = ["--var", "lane=local", "--var", "outcome=not-published", "--var",
                 "evidence=consumer saw nothing after 12:00", "--var", "reason=bulk test"]
    with running_engine(home):
        wait_until("three UNKNOWN attempts", lambda: unknown(home) == GHOSTS, 30)
        dry = run_nereus("--json", "playbook", "run", "settle-lane-uncertain", "--dry-run",
                         *variables, home=home)
        assert dry.code == 0, dry.stdout + dry.stderr
        settle = dry.json()["steps"][1]
        text = str(settle)
        for n, ghost in enumerate(GHOSTS):
            assert (f"consumer saw nothing after 12:00 (lane local: attempt {ghost} of message "
                    f"stuck-{n}, settled in bulk by playbook run") in text, text
        assert unknown(home) == GHOSTS
        run = run_nereus("--json", "playbook", "run", "settle-lane-uncertain", "--yes",
                         *variables, home=home, input_text="", timeout=180)
        assert run.code == 0, run.stdout + run.stderr
        assert unknown(home) == []
        shown = run_nereus("--json", "message", "show", "stuck-0", home=home).json()
        (attempt,) = [a for a in shown["attempts"] if a["attempt_id"] == "ghost-0"]
        assert attempt["state"] == "NOT_PUBLISHED"
        assert "consumer saw nothing after 12:00" in attempt["evidence"]
