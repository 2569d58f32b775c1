"""Helpers for driving the dashboard with Textual's Pilot: await a condition against a
deadline (never a fixed sleep), read what a table shows, read the toasts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable

from nereus.tui.app import DashboardApp
from tests.polling import WaitTimedOut


async def until(pilot: Pilot[Any], condition: Callable[[], object], *, what: str,
                timeout: float = 10.0) -> None:
    """``tests.polling.wait_until`` for a running app: the app runs between two looks at
    ``condition()`` (an await, not a sleep); fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise WaitTimedOut(f"{what}: not reached within {timeout} s")
        await pilot.pause(0.01)
    await pilot.pause()  # let the redraw that follows the change happen


def rows(table: DataTable[Any]) -> list[list[str]]:
    """The cells the table shows, as plain text, row by row."""
    return [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]


def toasts(app: DashboardApp) -> list[tuple[str, str, str]]:
    """(severity, title, message) of the notifications shown. Textual 8 has no public
    accessor for them; ``App._notifications`` is what its own tests read."""
    return [(n.severity, n.title, n.message) for n in app._notifications]


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run an async pilot scenario from a plain (sync) test."""
    asyncio.run(scenario())
