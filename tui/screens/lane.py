"""One lane: its fields, charts of due backlog and admissions per second, its state on
each shard, its open attempts and its messages. ``c`` / ``o`` close / open this lane."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Label, Sparkline, Static

from nereus.tui.formatting import fmt_int, fmt_rate
from nereus.tui.host import DashboardHost
from nereus.tui.models import attempts_of
from nereus.tui.mutations import LaneAction
from nereus.tui.screens.base import DrillDownScreen
from nereus.tui.state import DashboardState
from nereus.tui.widgets.summary import lane_summary
from nereus.tui.widgets.tables import AttemptTable, LaneShardTable, MessageTable


class LaneScreen(DrillDownScreen):
    AUTO_FOCUS = "#lane-shards"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "mutate('close')", "Close lane"),
        Binding("o", "mutate('open')", "Open lane"),
    ]

    def __init__(self, host: DashboardHost, lane: str) -> None:
        super().__init__(host, {"lane": lane})
        self.lane = lane

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="summary")
        with Horizontal(id="charts"):
            with Vertical(classes="chart"):
                yield Label("due backlog", id="backlog-label")
                yield Sparkline([], id="backlog-chart", summary_function=max)
            with Vertical(classes="chart"):
                yield Label("admissions/s", id="rate-label")
                yield Sparkline([], id="rate-chart", summary_function=max)
        yield LaneShardTable(title="By shard", id="lane-shards")
        yield AttemptTable(title="Open attempts", id="lane-attempts")
        yield MessageTable(title="Messages", id="lane-messages")
        yield Footer()

    def show_state(self, state: DashboardState) -> None:
        self.sub_title = f"lane {self.lane}"
        overview = state.overview
        lane = overview.lane(self.lane) if overview is not None else None
        summary = self.query_one("#summary", Static)
        if overview is None or lane is None:
            summary.update(f"lane {self.lane}: not in the engine's status (yet)")
            return
        summary.update(lane_summary(lane))
        self.query_one("#backlog-chart", Sparkline).data = list(lane.backlog_history)
        self.query_one("#rate-chart", Sparkline).data = list(lane.rate_history)
        self.query_one("#backlog-label", Label).update(
            f"due backlog {fmt_int(lane.due_backlog)}")
        self.query_one("#rate-label", Label).update(
            f"admissions {fmt_rate(lane.admission_rate)}")
        self.query_one(LaneShardTable).show(lane.shards)
        attempts = attempts_of(overview.attempts, lane=self.lane)
        self.show_attempts(attempts)

    def action_mutate(self, action: LaneAction) -> None:
        self.host.request_lane_mutation(action, self.lane)
