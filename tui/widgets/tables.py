"""Tables of view-model rows: each knows its columns and how one row draws.

A ``RowTable`` is handed the full, already filtered list of rows on every tick and keeps
the cursor on the same row (by key) across refreshes, so the selection an operator is
about to act on never jumps to another lane while the feed updates.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Generic, Protocol, TypeVar

from rich.console import RenderableType
from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from nereus.terminal_text import escape_controls
from nereus.tui.formatting import (
    fmt_backlog,
    fmt_due_lag,
    fmt_int,
    fmt_rate,
    fmt_text,
    spark_text,
)
from nereus.tui.models import (
    AttemptRow,
    LaneOnShardRow,
    LaneRow,
    MessageRow,
    ShardRow,
)

TREND_WIDTH = 12


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


RowT = TypeVar("RowT", bound=Keyed)


def _state(text: str) -> Text:
    style = {"ACTIVE": "green", "READY": "green", "OPEN": "green", "PUBLISHED": "green",
             "FAILED": "bold red", "NOT_READY": "bold red", "UNKNOWN": "bold red",
             "UNCONFIGURED": "bold red", "FENCED": "bold red", "DEGRADED": "bold yellow",
             "UNCERTAIN": "bold red", "CLOSED": "bold yellow", "PUBLISHING": "yellow",
             "STOPPING": "yellow", "STARTING": "yellow"}.get(text, "")
    return Text(escape_controls(text), style=style)


def _backlog(value: int | None, capped: bool) -> Text:
    return Text(fmt_backlog(value, capped), justify="right")


def _count(value: int | None, *, alarm: bool = False) -> Text:
    style = "bold red" if alarm and value else ""
    return Text(fmt_int(value), style=style, justify="right")


class RowTable(DataTable[RenderableType], Generic[RowT]):
    """A row-cursor DataTable over one kind of row."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, title: str, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.border_title = title
        self._rows: list[RowT] = []
        self.add_columns(*self.COLUMNS)

    @abstractmethod
    def cells(self, row: RowT) -> tuple[RenderableType, ...]:
        """The cells of ``row`` in ``COLUMNS`` order; every table defines its own.

        Abstract for mypy (a table without ``cells`` cannot be built): Textual's widget
        metaclass is not ``ABCMeta``, so nothing enforces it at run time.
        """

    @property
    def rows_shown(self) -> Sequence[RowT]:
        return tuple(self._rows)

    @property
    def selected(self) -> RowT | None:
        if not self._rows or not 0 <= self.cursor_row < len(self._rows):
            return None
        return self._rows[self.cursor_row]

    def row_for(self, key: str | None) -> RowT | None:
        return next((row for row in self._rows if row.key == key), None)

    def safe_cells(self, row: RowT) -> tuple[RenderableType, ...]:
        """``cells(row)`` with every plain string shown as text, never as markup, and its
        control characters escaped: ids, lanes and reasons come from clients and operators."""
        return tuple(Text(escape_controls(cell)) if isinstance(cell, str) else cell
                     for cell in self.cells(row))

    def show(self, rows: Sequence[RowT]) -> None:
        """Replace the rows, keeping the cursor on the same key when it is still there."""
        kept = self.selected.key if self.selected is not None else None
        if [row.key for row in rows] == [row.key for row in self._rows]:
            self._rows = list(rows)
            for index, row in enumerate(rows):  # same rows in place: update the cells only
                for column, cell in enumerate(self.safe_cells(row)):
                    self.update_cell_at(Coordinate(index, column), cell)
            return
        self.clear()
        self._rows = list(rows)
        for row in rows:
            self.add_row(*self.safe_cells(row), key=row.key)
        keys = [row.key for row in rows]
        if kept in keys:
            self.move_cursor(row=keys.index(kept), animate=False)


class ShardTable(RowTable[ShardRow]):
    COLUMNS = ("shard", "state", "applied", "lag", "due", "admit", "uncertain")

    def cells(self, row: ShardRow) -> tuple[RenderableType, ...]:
        return (row.shard, _state(row.state), _count(row.applied_position), _count(row.lag),
                _backlog(row.due_backlog, row.due_backlog_capped),
                Text(fmt_rate(row.admission_rate), justify="right"),
                _count(row.uncertain, alarm=True))


class LaneTable(RowTable[LaneRow]):
    COLUMNS = ("lane", "gate", "ready", "due", "p99 lag", "in fl", "fail", "due trend")

    def cells(self, row: LaneRow) -> tuple[RenderableType, ...]:
        return (row.lane, _state(row.gate), _state(row.readiness),
                _backlog(row.due_backlog, row.due_backlog_capped),
                Text(fmt_due_lag(row.due_lag_p99_ms, row.due_backlog), justify="right"),
                _count(row.in_flight),
                _count(row.failures, alarm=True),
                Text(spark_text(row.backlog_history, TREND_WIDTH), style="cyan"))


class AttemptTable(RowTable[AttemptRow]):
    COLUMNS = ("state", "message", "lane", "shard", "attempt", "admitted")

    def cells(self, row: AttemptRow) -> tuple[RenderableType, ...]:
        state = "UNCERTAIN" if row.uncertain else row.state
        return (_state(state), row.delay_message_id, row.lane, row.shard, row.attempt_id,
                fmt_text(row.admitted_at))


class LaneShardTable(RowTable[LaneOnShardRow]):
    """A lane's shards (the first column is the row's key: the shard)."""

    COLUMNS = ("shard", "gate", "due", "open attempts", "admissions")

    def cells(self, row: LaneOnShardRow) -> tuple[RenderableType, ...]:
        return (row.key, _state(row.gate), _backlog(row.due_backlog, row.due_backlog_capped),
                _count(row.open_attempts),
                _count(row.admissions))


class ShardLaneTable(LaneShardTable):
    """A shard's lanes: the same cells, keyed by lane."""

    COLUMNS = ("lane", *LaneShardTable.COLUMNS[1:])


class MessageTable(RowTable[MessageRow]):
    COLUMNS = ("message", "state", "lane", "shard", "deliver at", "retries")

    def cells(self, row: MessageRow) -> tuple[RenderableType, ...]:
        return (row.delay_message_id, _state(row.state), row.lane, row.shard,
                fmt_text(row.deliver_at), _count(row.retries))


class FieldTable(DataTable[RenderableType]):
    """Label / value pairs (a message's fields), one per row, scrollable at 80x24."""

    def __init__(self, *, title: str, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_header=False)
        self.border_title = title
        self.add_columns("field", "value")

    def show(self, fields: Sequence[tuple[str, str]]) -> None:
        self.clear()
        for label, value in fields:
            self.add_row(Text(label, style="bold"),
                         _state(value) if value.isupper() else Text(escape_controls(value)))
