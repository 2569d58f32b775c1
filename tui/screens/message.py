"""One message (``GET /v1/messages/<id>``): its fields and every attempt, loaded in a
worker so a slow engine never blocks the keyboard; ``r`` loads it again."""

from __future__ import annotations

import contextlib
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Header, Static

from nereus.adapters.admin.wire import MessageExplanation
from nereus.errors import NereusError
from nereus.terminal_text import escape_controls
from nereus.tui.events import MessageLoaded
from nereus.tui.host import DashboardHost
from nereus.tui.models import message_detail
from nereus.tui.screens.base import LiveScreen
from nereus.tui.widgets.tables import AttemptTable, FieldTable
from nereus.views import MessageDetail


class MessageScreen(LiveScreen):
    AUTO_FOCUS = "#fields"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, host: DashboardHost, delay_message_id: str, route: str) -> None:
        super().__init__(host)
        self.delay_message_id = delay_message_id
        self.route = route

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(f"message {escape_controls(self.delay_message_id)} · loading…"),
                     id="message-head")
        yield Static(Text(""), id="message-why")
        yield FieldTable(title="Fields", id="fields")
        yield AttemptTable(title="Attempts", id="message-attempts")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"message {self.delay_message_id}"
        self.action_reload()

    def action_reload(self) -> None:
        self.run_worker(self._load, thread=True, group="message", exclusive=True)

    def _load(self) -> None:
        document: MessageDetail | None = None
        explained: MessageExplanation | None = None
        error = None
        try:
            document = self.host.source.message(self.delay_message_id, route=self.route)
        except NereusError as exc:
            error = exc.message + (f" ({exc.hint})" if exc.hint else "")
        if document is not None:
            with contextlib.suppress(NereusError):  # the message shows without it
                explained = self.host.source.explain(self.delay_message_id, route=self.route)
        self.post_message(MessageLoaded(document, error, explained))

    def on_message_loaded(self, event: MessageLoaded) -> None:
        head = self.query_one("#message-head", Static)
        if event.error is not None or event.document is None:
            head.update(Text(escape_controls(f"message {self.delay_message_id}: {event.error}")))
            return
        detail = message_detail(event.document)
        head.update(Text(escape_controls(f"message {detail.delay_message_id} · {detail.state} "
                                         f"· {len(detail.attempts)} attempt(s)")))
        self.query_one("#message-why", Static).update(_why(event.explained))
        self.query_one(FieldTable).show(detail.fields)
        attempts = self.query_one(AttemptTable)
        attempts.show(detail.attempts)
        attempts.border_title = f"Attempts {len(detail.attempts)}"


def _why(explained: MessageExplanation | None) -> Text:
    """``message explain``'s answer in one line: the first gate that holds the message."""
    if explained is None:
        return Text("")
    held = explained.held_by
    why = escape_controls(explained.why)
    if held is None:
        return Text(f"nothing holds it: {why}", style="green")
    return Text(f"held by {escape_controls(str(held))}: {why}", style="yellow")
