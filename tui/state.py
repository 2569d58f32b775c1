"""The dashboard's whole state as one value, and the two events that change it.

The app holds one ``DashboardState`` and replaces it on every feed event; screens only
read it. Keeping the fold pure (no widgets, no clock) is what lets tests feed documents in
and compare the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nereus.tui.history import History, advance
from nereus.tui.models import Overview, build_overview
from nereus.tui.source import Snapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """Whether the feed is live, and if not, why (the engine's own words)."""

    connected: bool = False
    problem: str | None = None
    hint: str | None = None
    failures: int = 0  # consecutive failed connection attempts


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardState:
    overview: Overview | None = None
    history: History = field(default_factory=History)
    connection: Connection = field(default_factory=Connection)


def with_snapshot(state: DashboardState, snapshot: Snapshot) -> DashboardState:
    """A feed tick arrived: fold it into the history and rebuild the overview."""
    history = advance(state.history, snapshot.status)
    return DashboardState(overview=build_overview(snapshot, history), history=history,
                          connection=Connection(connected=True))


def with_outage(state: DashboardState, problem: str, hint: str | None) -> DashboardState:
    """The feed failed or ended: keep the last overview (shown as stale), count the try."""
    return replace(state, connection=Connection(
        connected=False, problem=problem, hint=hint,
        failures=state.connection.failures + 1))
