"""Reading a shard offline, without Typer: its database opened read-only, where its log
ends, and ``nereus shard inspect`` itself (``inspect_shard``).

The Typer command (``nereus.cli.commands.shard.inspection``) and the console script's lean
path (``nereus.cli.lean``) both call ``inspect_shard``: one implementation of what the
command reads and prints, whichever way the line came in. Nothing here imports Typer, and
Rich only to draw the report where it does more than ``_plain`` can: a table to fit in a
narrower width, text Rich would read as markup. Elsewhere, through a pipe or on a terminal
(bold and italic), ``_plain`` writes the same characters (``Output.emit``'s ``plain``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from nereus.cli.output import shown

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.context import Env
    from nereus.cli.output import TextForm
    from nereus.inspection import DiskReport, ShardReport
    from nereus.shard import ShardId
    from nereus.state.store import ShardStore


def open_db(env: Env, text: str, db: Path | None, *,
            lazy_indexes: bool = False) -> tuple[ShardId, ShardStore]:
    """Shard ``text`` and its database, read-only: ``db`` (any shard database, the shard
    name only parsed), else the home's live one (the shard checked against the config).
    ``lazy_indexes``: for a few reads (``ShardStore.open``)."""
    from nereus.shard import ShardId
    from nereus.state import keys
    from nereus.state.store import ShardStore
    from nereus.state.values import Identity

    shard = ShardId.parse(text) if db is not None else env.shard(text)
    path = db if db is not None else env.layout.shard_state(shard)
    identity = Identity(route=shard.route, partition=shard.partition,
                        schema_version=keys.SCHEMA_VERSION)
    return shard, ShardStore.open(path, identity=identity, read_only=True,
                                  lazy_indexes=lazy_indexes)


def log_end(env: Env, shard: ShardId) -> int | None:
    """Where ``shard``'s log ends, or None when this home has no log of it to read. A file
    log is read as a reader sees it (``FileShardLog.observed_end_position``: no append
    lock, bounded work), a broker's log asked."""
    if env.layout.config.exists() and (env.layout.shard_log(shard).is_dir() or
                                       env.config.route(shard.route).log != "file"):
        log = env.shard_log(shard, create=False)
        from nereus.adapters.backends.shardlog.file_log import FileShardLog

        if isinstance(log, FileShardLog):
            return log.observed_end_position()
        return log.end_position()
    return None


def inspect_shard(env: Env, shard_name: str, db: Path | None) -> None:
    """``nereus shard inspect``: the report of the shard's database (``--db``, else the
    home's live one), printed through ``env.output``."""
    import msgspec

    from nereus.inspection import ShardReport, inspect_store

    shard, store = open_db(env, shard_name, db, lazy_indexes=True)
    with store:
        report = inspect_store(store, log_end_position=log_end(env, shard))
    # the plain renderer reads the copy Output.emit escaped, back in its Struct
    env.output.emit(msgspec.to_builtins(report), lambda out: _draw(out, _view(shown(report))),
                    plain=lambda escaped, form: _plain(
                        _view(msgspec.convert(escaped, ShardReport)), form))


class _Line(msgspec.Struct, frozen=True):
    """A line of the human report: ``bold`` (shown bold on a terminal), then ``text``."""

    bold: str
    text: str


class _Grid(msgspec.Struct, frozen=True):
    """A table of the human report: its title, its columns (header, right-justified?) and
    its rows of cells."""

    title: str
    columns: tuple[tuple[str, bool], ...]
    rows: tuple[tuple[str, ...], ...]


def _view(report: ShardReport) -> list[_Line | _Grid]:
    """What the human report shows, whichever renderer draws it (``report``'s strings made
    safe to print by the caller: for Rich or for plain text)."""
    lag = "unknown (no log here)" if report.lag is None else str(report.lag)
    states = report.messages_by_state
    return [
        _Line(f"shard {report.shard}",
              f"  schema v{report.schema_version}  db {report.db.path}"),
        _Line("", f"applied position {report.applied_position}  records applied "
                  f"{report.records_applied}  lag {lag}"),
        _Line("", f"timeline head {report.timeline_head or '-'}  open obligations "
                  f"{report.open_obligations}  paused {report.paused}"),
        _Grid("messages by state", tuple((state, True) for state in states),
              (tuple(str(n) for n in states.values()),)),
        _Grid("lanes", tuple((c, False) for c in ("lane", "gate", "scheduled",
                                                  "open attempts", "next due")),
              tuple((lane.lane, lane.gate, str(lane.messages_by_state["SCHEDULED"]),
                     str(lane.open_attempts), lane.next_due or "-")
                    for lane in report.lanes)),
        _Line("", _disk_line(report.disk)),
    ]


def _draw(out: Console, view: list[_Line | _Grid]) -> None:
    """``view`` through Rich (its data strings made safe inside markup by ``Output.emit``)."""
    from rich.table import Table

    for part in view:
        if isinstance(part, _Line):
            out.print(f"[bold]{part.bold}[/bold]{part.text}" if part.bold else part.text)
            continue
        table = Table(title=part.title)
        for header, right in part.columns:
            table.add_column(header, justify="right" if right else "left")
        for row in part.rows:
            table.add_row(*row)
        out.print(table)


_BOLD: Final = "\x1b[1m{}\x1b[0m"  # as Rich writes a style on a terminal (any colour system)
_ITALIC: Final = "\x1b[3m{}\x1b[0m"


def _plain(view: list[_Line | _Grid], form: TextForm) -> str | None:
    """``view`` as the characters Rich prints for it in ``form`` (``Output.emit``'s
    ``plain``: through a pipe, or on a terminal where it writes bold and italic, never a
    table narrower than it is drawn), or None where that is not certain: a string Rich
    would read as markup or an emoji code, anything but printable ASCII, a table wider
    than ``form.width``."""
    lines: list[str] = []
    for part in view:
        if isinstance(part, _Line):
            if not _plain_safe(part.bold + part.text):
                return None
            bold = _BOLD.format(part.bold) if form.styled and part.bold else part.bold
            lines.append(bold + part.text)
            continue
        texts = (part.title, *(header for header, _ in part.columns),
                 *(cell for row in part.rows for cell in row))
        if not all(_plain_safe(text) for text in texts):
            return None
        drawn = _grid_lines(part, styled=form.styled)
        if len(drawn[0]) > form.width:
            return None
        lines += [_ITALIC.format(part.title) if form.styled else part.title, *drawn]
    return "".join(line + "\n" for line in lines)


def _grid_lines(grid: _Grid, *, styled: bool) -> list[str]:
    """``grid`` as Rich draws a ``Table`` by default (heavy head, one space of padding,
    the header bold on a terminal and justified as its column), without its title."""
    widths = [max([len(header), *(len(row[i]) for row in grid.rows)])
              for i, (header, _) in enumerate(grid.columns)]
    rights = [right for _, right in grid.columns]

    def rule(left: str, fill: str, cross: str, end: str) -> str:
        return left + cross.join(fill * (width + 2) for width in widths) + end

    def justified(texts: tuple[str, ...]) -> list[str]:
        return [text.rjust(width) if right else text.ljust(width)
                for text, width, right in zip(texts, widths, rights, strict=True)]

    headers = justified(tuple(header for header, _ in grid.columns))
    if styled:  # each of the cell's three parts styled apart, as Rich writes them
        head = "┃" + "┃".join(_BOLD.format(" ") + _BOLD.format(header) + _BOLD.format(" ")
                              for header in headers) + "┃"
    else:
        head = "┃" + "┃".join(f" {header} " for header in headers) + "┃"
    return [rule("┏", "━", "┳", "┓"), head, rule("┡", "━", "╇", "┩"),
            *("│" + "│".join(f" {cell} " for cell in justified(row)) + "│"
              for row in grid.rows),
            rule("└", "─", "┴", "┘")]


_EMOJI_CODE: Final = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")  # Rich's own pattern
_PLAIN: Final = re.compile(r"[ -Z^-~]*")  # printable ASCII but [ \\ ]


def _plain_safe(line: str) -> bool:
    """True when Rich prints ``line`` as it is: printable ASCII without ``[``, ``\\`` or
    ``]`` (markup), and no ``:name:`` Rich could turn into an emoji (a time's ``:MM:``
    is not one)."""
    return (_PLAIN.fullmatch(line) is not None
            and all(len(m.group(2)) == 2 and m.group(2).isdigit()
                    for m in _EMOJI_CODE.finditer(line)))


def _mb(count: int | None) -> str:
    return "?" if count is None else f"{count / 1e6:,.1f} MB"


def _disk_line(disk: DiskReport) -> str:
    """Disk use in one line; the terminal-retained figure says it is an estimate."""
    oldest = disk.oldest_retained
    retained = ("none" if oldest is None else
                f"{oldest.kind} {oldest.id} until {oldest.expire_at}")
    return (f"disk: live {_mb(disk.live_bytes)}, obsolete {_mb(disk.obsolete_bytes)} "
            f"(SST {_mb(disk.sst_bytes)} + WAL {_mb(disk.wal_bytes)} - live), "
            f"terminal retained ~{_mb(disk.terminal_retained_bytes)} (estimate, "
            f"{disk.terminal_messages} terminal messages); oldest retained: {retained}")
