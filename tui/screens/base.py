"""What every live screen shares: a host, a redraw from the current state, and the way
to open a message (message ids appear on several screens)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.screen import Screen

from nereus.errors import NereusError
from nereus.tui.events import MessagesLoaded
from nereus.tui.host import DashboardHost
from nereus.tui.state import DashboardState

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
    """A shard or lane screen: Escape goes back, ``r`` reloads its message list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reload", "Reload messages"),
    ]

    def on_mount(self) -> None:
        self.action_reload()

    def message_query(self) -> Mapping[str, str]:
        """The ``GET /v1/messages`` filter of this screen (lane or shard)."""
        raise NotImplementedError

    def action_reload(self) -> None:
        self.run_worker(self._load_messages, thread=True, group="messages", exclusive=True)

    def _load_messages(self) -> None:
        query: dict[str, Any] = dict(self.message_query())
        documents: Sequence[Mapping[str, Any]] = ()
        error = None
        try:
            documents = self.host.source.messages(limit=MESSAGE_LIMIT, **query)
        except NereusError as exc:
            error = exc.message
        self.post_message(MessagesLoaded(documents, error))
