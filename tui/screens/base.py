"""What every live screen shares: a host, a redraw from the current state, and the way
to open a message (message ids appear on several screens)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable

from nereus.errors import NereusError
from nereus.tui.events import MessagesLoaded
from nereus.tui.host import DashboardHost
from nereus.tui.models import AttemptRow, message_row
from nereus.tui.state import DashboardState
from nereus.tui.widgets.tables import AttemptTable, MessageTable
from nereus.views import MessageView

MESSAGE_LIMIT = 50


class LiveScreen(Screen[None]):
    """A screen redrawn from the app's state on every feed tick."""

    def __init__(self, host: DashboardHost) -> None:
        super().__init__()
        self.host = host
        self.ready = False  # its widgets exist: feed events may arrive before they do

    def on_mount(self) -> None:
        self.ready = True
        self.show_state(self.host.state)

    def show_state(self, state: DashboardState) -> None:
        """Draw ``state``; called on mount and on every feed tick."""

    def open_message(self, delay_message_id: str, route: str) -> None:
        from nereus.tui.screens.message import MessageScreen

        self.app.push_screen(MessageScreen(self.host, delay_message_id, route))


class DrillDownScreen(LiveScreen):
    """A shard or lane screen: its open attempts and messages (Enter opens one), Escape
    goes back, ``r`` reloads its message list. Each has one ``AttemptTable`` and one
    ``MessageTable``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reload", "Reload messages"),
    ]

    def __init__(self, host: DashboardHost, message_query: Mapping[str, str]) -> None:
        super().__init__(host)
        self.message_query = dict(message_query)  # the GET /v1/messages filter (lane or shard)

    def on_mount(self) -> None:
        self.action_reload()

    def show_attempts(self, attempts: Sequence[AttemptRow]) -> None:
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

    def action_reload(self) -> None:
        self.run_worker(self._load_messages, thread=True, group="messages", exclusive=True)

    def _load_messages(self) -> None:
        query = self.message_query
        documents: Sequence[MessageView] = ()
        error = None
        try:
            documents = self.host.source.messages(lane=query.get("lane"),
                                                  shard=query.get("shard"),
                                                  limit=MESSAGE_LIMIT)
        except NereusError as exc:
            error = exc.message
        self.post_message(MessagesLoaded(documents, error))
