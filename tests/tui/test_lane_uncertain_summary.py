"""The dashboard's lane screen says how many attempts are UNCERTAIN and how old the oldest
is, and whether the lane fences a dead owner's sends (no Textual: the summary text)."""

from __future__ import annotations

from nereus.tui.source import Snapshot
from nereus.tui.state import DashboardState, with_snapshot
from nereus.tui.widgets.summary import lane_summary
from tests.tui.fakes import attempt_documents, attempts_of, status_document, status_of


def _lane_text(**fields: object) -> str:
    status = dict(status_document(1))
    status["lanes"] = [{**lane, **fields} for lane in status["lanes"]]
    state = with_snapshot(DashboardState(), Snapshot(
        status=status_of(status), attempts=attempts_of(attempt_documents())))
    assert state.overview is not None
    return lane_summary(state.overview.lanes[0]).plain


def test_a_lane_shows_its_uncertain_attempts_and_whether_it_fences() -> None:
    """431 UNCERTAIN, the oldest for 5m: said with the playbook that settles them; a lane
    with a destination and no fencing says so; a fenced lane with none says neither."""
    text = _lane_text(uncertain=431, uncertain_oldest_age_ms=300_000, fencing=None)
    assert "431 attempt(s) UNCERTAIN, the oldest for 5m" in text
    assert "settle-lane-uncertain" in text and "does not fence" in text
    quiet = _lane_text(uncertain=0, fencing="kafka transactions")
    assert "UNCERTAIN" not in quiet and "does not fence" not in quiet

