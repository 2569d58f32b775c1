"""The overview: shards, lanes (with a backlog trend), and open obligations.

Enter on a row drills down (shard, lane, or the attempt's message); ``/`` filters every
table by text; ``n`` opens the cluster screen (nodes, ownership, moves); ``c`` / ``o`` ask
to close / open the lane under the lanes table's cursor, behind a confirmation that
requires a reason.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Input

from nereus.tui.models import filter_rows
from nereus.tui.mutations import LaneAction
from nereus.tui.screens.base import LiveScreen
from nereus.tui.state import DashboardState
from nereus.tui.widgets.status import EngineBanner, StatusLine
from nereus.tui.widgets.tables import AttemptTable, LaneTable, ShardTable


def _title(name: str, shown: int, total: int) -> str:
    return f"{name} {shown}/{total}" if shown != total else f"{name} {total}"


class OverviewScreen(LiveScreen):
    AUTO_FOCUS = "#shards"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("c", "lane('close')", "Close lane"),
        Binding("o", "lane('open')", "Open lane"),
        Binding("m", "find_message", "Message"),
        Binding("n", "cluster", "Cluster"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusLine(id="status")
        yield EngineBanner(id="banner")
        yield Input(placeholder="/ filter rows: shard, lane, message id, state…", id="filter",
                    compact=True)
        yield ShardTable(title="Shards", id="shards")
        yield LaneTable(title="Lanes", id="lanes")
        yield AttemptTable(title="Open obligations", id="attempts")
        yield Footer()

    # drawing ----------------------------------------------------------------------------
    def show_state(self, state: DashboardState) -> None:
        self.query_one(StatusLine).show(state)
        self.query_one(EngineBanner).show(state, self.host.source.where, self.host.retry_s)
        overview = state.overview
        if overview is None:
            return
        query = self.query_one("#filter", Input).value
        shards = filter_rows(overview.shards, query)
        lanes = filter_rows(overview.lanes, query)
        attempts = filter_rows(overview.attempts, query)
        shard_table = self.query_one(ShardTable)
        shard_table.show(shards)
        shard_table.border_title = _title("Shards", len(shards), len(overview.shards))
        lane_table = self.query_one(LaneTable)
        lane_table.show(lanes)
        lane_table.border_title = _title("Lanes", len(lanes), len(overview.lanes))
        attempt_table = self.query_one(AttemptTable)
        attempt_table.show(attempts)
        attempt_table.border_title = (
            # the total from the lanes' counters: the rows are only the first page of them
            _title("Open obligations", len(attempts),
                   max(len(overview.attempts), overview.obligations_count))
            + f" · UNCERTAIN {overview.uncertain_count}")

    # filter -----------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.show_state(self.host.state)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.query_one(ShardTable).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.query_one(ShardTable).focus()

    # drill-down -------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        from nereus.tui.screens.lane import LaneScreen
        from nereus.tui.screens.shard import ShardScreen

        key = event.row_key.value
        if key is None:
            return
        table = event.data_table
        if isinstance(table, ShardTable):
            self.app.push_screen(ShardScreen(self.host, key))
        elif isinstance(table, LaneTable):
            self.app.push_screen(LaneScreen(self.host, key))
        elif isinstance(table, AttemptTable) and (row := table.row_for(key)) is not None:
            self.open_message(row.delay_message_id, row.route)

    def action_find_message(self) -> None:
        from nereus.tui.screens.modals import MessagePrompt

        overview = self.host.state.overview
        routes = overview.routes if overview is not None else ()
        route = routes[0] if routes else "default"

        def opened(delay_message_id: str | None) -> None:
            if delay_message_id:
                self.open_message(delay_message_id, route)

        self.app.push_screen(MessagePrompt(route=route), opened)

    def action_cluster(self) -> None:
        from nereus.tui.screens.cluster import ClusterScreen

        self.app.push_screen(ClusterScreen(self.host))

    # mutations --------------------------------------------------------------------------
    def action_lane(self, action: LaneAction) -> None:
        lane = self.query_one(LaneTable).selected
        if lane is None:
            self.notify("no lane under the cursor of the lanes table", severity="warning",
                        markup=False)
            return
        self.host.request_lane_mutation(action, lane.lane)
