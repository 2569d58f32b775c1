"""The two lines above the tables: what the engine says now, and what is wrong with the
connection when it is wrong.

The texts are built by pure functions from the state (no clock), so snapshots are
deterministic: the only time shown is the engine's own Trusted UTC from the document.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from nereus.tui.formatting import fmt_ms
from nereus.tui.state import DashboardState

START_HINT = "start it with `nereus engine start`"


def status_text(state: DashboardState) -> Text:
    """``● live  UNCERTAIN n  obligations n  trusted T ±u  owner O`` on one line, the most
    urgent first, so a narrow terminal cuts off only the least important part."""
    overview = state.overview
    text = Text(no_wrap=True, overflow="ellipsis")
    if state.connection.connected:
        text.append("● live", style="bold green")
    elif overview is not None:
        text.append("○ stale", style="bold yellow")
    else:
        text.append("○ waiting", style="bold yellow")
    if overview is None:
        return text
    uncertain = overview.uncertain_count
    text.append("  UNCERTAIN ")
    text.append(str(uncertain), style="bold red" if uncertain else "green")
    text.append(f"  obligations {overview.obligations_count}")
    if overview.trusted_earliest:
        text.append(f"  trusted {overview.trusted_earliest}", style="dim")
        if overview.uncertainty_ms is not None:
            text.append(f" ±{fmt_ms(overview.uncertainty_ms)}", style="dim")
    if overview.owner_id:
        text.append(f"  owner {overview.owner_id}", style="dim")
    return text


def banner_text(state: DashboardState, where: str, retry_s: float) -> Text | None:
    """What to tell the operator when no feed is live (None while it is)."""
    connection = state.connection
    if connection.connected:
        return None
    text = Text()
    if connection.failures == 0:
        text.append(f"Connecting to the engine at {where} …")
        return text
    text.append(f"No engine answers at {where}", style="bold")
    if state.overview is not None:
        text.append(" (the tables show the last data received)")
    text.append(f"\n{connection.problem}")
    if connection.hint and connection.hint != START_HINT:
        text.append(f"\n{connection.hint}")
    text.append(f"\n{START_HINT} — retrying every {retry_s:g} s "
                f"(attempt {connection.failures})")
    return text


class StatusLine(Static):
    def show(self, state: DashboardState) -> None:
        self.update(status_text(state))


class EngineBanner(Static):
    """Shown only while the feed is not live."""

    def show(self, state: DashboardState, where: str, retry_s: float) -> None:
        text = banner_text(state, where, retry_s)
        self.display = text is not None
        if text is not None:
            self.update(text)
