"""Modals: the confirmation every mutation goes through, and the message-id prompt.

``ReasonModal`` dismisses with the reason, or None when cancelled; it will not confirm
without a reason (the CLI's rule), and it names the exact command that will run and the
operator it will be recorded as, so nothing happens that the operator did not read.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from nereus.tui.mutations import LaneAction, reason_problem

_EFFECT = {
    "close": "No new publish admissions on any shard of this lane until it is opened again. "
             "Attempts already admitted still finish.",
    "open": "Publish admissions of this lane resume on every shard.",
}


class ReasonModal(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, action: LaneAction, lane: str, *, operator: str) -> None:
        super().__init__()
        self.lane_action = action
        self.lane = lane
        self.operator = operator

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"{self.lane_action.capitalize()} lane {self.lane}?", id="dialog-title")
            yield Static(_EFFECT[self.lane_action], id="dialog-effect")
            yield Static(f"runs `nereus lane {self.lane_action} {self.lane} --reason … --yes` "
                         f"as {self.operator}", id="dialog-command")
            yield Input(placeholder="reason (required, recorded in the Shard Log)", id="reason")
            yield Static("", id="reason-problem")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.lane_action.capitalize()} lane", id="confirm",
                             variant="error" if self.lane_action == "close" else "primary")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self._confirm()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._confirm()

    def _confirm(self) -> None:
        reason = self.query_one("#reason", Input).value
        problem = reason_problem(reason)
        if problem is not None:
            self.query_one("#reason-problem", Static).update(problem)
            self.query_one("#reason", Input).focus()
            return
        self.dismiss(reason.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class MessagePrompt(ModalScreen[str | None]):
    """Ask for a delayMessageId to open (on ``route``)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, *, route: str) -> None:
        super().__init__()
        self.route = route

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Open a message (route {self.route})", id="dialog-title")
            yield Input(placeholder="delayMessageId", id="message-id")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        self.dismiss(value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
