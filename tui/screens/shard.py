"""One shard: its positions and counters, each lane's gate and backlog on it, its open
attempts and its messages."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer, Header, Static

from nereus.tui.host import DashboardHost
from nereus.tui.models import attempts_of, lanes_on_shard
from nereus.tui.screens.base import DrillDownScreen
from nereus.tui.state import DashboardState
from nereus.tui.widgets.summary import shard_summary
from nereus.tui.widgets.tables import AttemptTable, MessageTable, ShardLaneTable


class ShardScreen(DrillDownScreen):
    AUTO_FOCUS = "#shard-lanes"

    def __init__(self, host: DashboardHost, shard: str) -> None:
        super().__init__(host, {"shard": shard})
        self.shard = shard

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="summary")
        yield ShardLaneTable(title="Lanes on this shard", id="shard-lanes")
        yield AttemptTable(title="Open attempts", id="shard-attempts")
        yield MessageTable(title="Messages", id="shard-messages")
        yield Footer()

    def show_state(self, state: DashboardState) -> None:
        self.sub_title = f"shard {self.shard}"
        overview = state.overview
        row = overview.shard(self.shard) if overview is not None else None
        summary = self.query_one("#summary", Static)
        if overview is None or row is None:
            summary.update(f"shard {self.shard}: not in the engine's status (yet)")
            return
        summary.update(shard_summary(row))
        self.query_one(ShardLaneTable).show(lanes_on_shard(overview, self.shard))
        attempts = attempts_of(overview.attempts, shard=self.shard)
        self.show_attempts(attempts)
