"""Ids, lanes and reasons on the dashboard are text, never markup, and their control
characters are shown escaped: data from clients cannot drive the operator's terminal."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate

from nereus.tui.models import MessageRow
from nereus.tui.widgets.tables import FieldTable, MessageTable
from tests.tui.pilot import run

HOSTILE = "\x1b[2J[bold red]alarm[/bold red]\u202e"
SHOWN = "\\x1b[2J[bold red]alarm[/bold red]\\u202e"


class _Tables(App[None]):
    def compose(self) -> ComposeResult:
        yield MessageTable(title="messages")
        yield FieldTable(title="fields")


def test_table_cells_are_escaped_text_not_markup() -> None:
    """Hostile ids and field values show as plain, escaped text in the dashboard's tables."""
    async def scenario() -> None:
        app = _Tables()
        async with app.run_test() as pilot:
            row = MessageRow(delay_message_id=HOSTILE, shard="default/0", lane="local",
                             state="SCHEDULED", deliver_at=None, retries=0)
            app.query_one(MessageTable).show([row])
            app.query_one(FieldTable).show([("key", HOSTILE)])
            await pilot.pause()
            for cell in (app.query_one(MessageTable).get_cell_at(Coordinate(0, 0)),
                         app.query_one(FieldTable).get_cell_at(Coordinate(0, 1))):
                assert isinstance(cell, Text)
                assert cell.plain == SHOWN
                assert not cell.spans  # no style came from the data

    run(scenario)
