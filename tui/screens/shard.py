"""One shard: its positions and counters, each lane's gate and backlog on it, its open
attempts and its messages."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Header, Static

from nereus.tui.events import MessagesLoaded
from nereus.tui.host import DashboardHost
from nereus.tui.models import attempts_of, lanes_on_shard, message_row
from nereus.tui.screens.base import MESSAGE_LIMIT, DrillDownScreen
from nereus.tui.state import DashboardState
from nereus.tui.widgets.summary import shard_summary
from nereus.tui.widgets.tables import AttemptTable, MessageTable, ShardLaneTable


class ShardScreen(DrillDownScreen):
    AUTO_FOCUS = "#shard-lanes"

    def __init__(self, host: DashboardHost, shard: str) -> None:
        super().__init__(host)
        self.shard = shard

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="summary")
        yield ShardLaneTable(title="Lanes on this shard", id="shard-lanes")
        yield AttemptTable(title="Open attempts", id="shard-attempts")
        yield MessageTable(title="Messages", id="shard-messages")
        yield Footer()

    def message_query(self) -> Mapping[str, str]:
        return {"shard": self.shard}

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
        table = self.query_one(AttemptTable)
        table.show(attempts)
        table.border_title = f"Open attempts {len(attempts)}"

    def on_messages_loaded(self, event: MessagesLoaded) -> None:
        table = self.query_one(MessageTable)
        if event.error is not None:
            table.border_title = f"Messages — {event.error}"
            return
        table.show([message_row(doc) for doc in event.documents])
        table.border_title = f"Messages (first {MESSAGE_LIMIT}, r reloads)"

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        table = event.data_table
        if isinstance(table, AttemptTable | MessageTable) and (row := table.row_for(key)):
            self.open_message(row.delay_message_id, row.route)
