"""``nereus engine logs``: the engine's JSON log, rendered for people or passed through.

Reads ``<home>/log`` (the daemon's ``engine.log`` and each worker's ``worker-<K>.log``)
without the engine: a stopped engine's logs are what an operator reads at 3 a.m.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from nereus.cli.context import Env
from nereus.cli.log_view import LogLine  # at run time: the document's schema names it

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.cli.log_view import Follower, LogFilter

_LEVEL_STYLE = {"debug": "dim", "info": "", "warning": "yellow", "error": "red",
                "critical": "bold red", "unparsed": "magenta"}
FOLLOW_POLL_S = 0.25


class EngineLogLines(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``engine logs`` document: the log files read and the lines kept, each the JSON
    object the engine wrote, unchanged (with ``--follow``, one such object per line)."""

    files: list[str]
    lines: list[LogLine]
    # with --message, when no line names the message: why, and where else to look
    note: str | None = None


def logs(
    ctx: typer.Context,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing lines as they are written (Ctrl-C stops); "
        "with --json, one JSON object per line.")] = False,
    level: Annotated[str | None, typer.Option(
        "--level", metavar="LEVEL",
        help="Only lines at this level or above: debug, info, warning, error, critical.")]
    = None,
    shard: Annotated[str | None, typer.Option(
        "--shard", metavar="SHARD", help="Only lines about this shard (ROUTE/PARTITION).")]
    = None,
    message: Annotated[str | None, typer.Option(
        "--message", metavar="ID",
        help="A message's story: lines naming it, its attempts and its claims. A message "
        "admitted and published without trouble is logged at debug only ([engine] "
        "log_level); with no line, a note says so.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="TIME",
        help="Only lines from this time on: a duration ago (10m, 2h) or a time "
        "(ISO-8601, epoch ms).")] = None,
) -> None:
    """The engine's log: rendered with Rich, or passed through with --json."""
    from nereus.cli import log_view
    from nereus.terminal_text import escape_controls

    env: Env = ctx.obj
    wanted = _wanted(env, level, shard, message, since)
    log_dir = env.layout.logs
    files = log_view.log_files(log_dir)
    if not files and not follow:
        from nereus.errors import NotFound

        raise NotFound(f"no engine log in {log_dir}",
                       hint="the engine writes it once started: `nereus engine start`")
    follower = log_view.Follower(log_dir) if follow else None
    lines = log_view.read_lines(files)
    wanted.link(lines)
    kept = [line for line in lines if wanted.keeps(line)]
    note = _no_story(env, message) if message is not None and not kept else None
    if follower is None:
        data = msgspec.to_builtins(EngineLogLines(
            files=[str(path) for path in files], lines=kept, note=note))

        def human(out: Console) -> None:
            _print_lines(out, data["lines"])
            if note is not None:
                env.output.err.print(escape_controls(note), markup=False, highlight=False)

        env.output.emit(data, human)
        return
    if note is not None:
        env.output.err.print(escape_controls(f"{note} (following: new lines will show)"),
                             markup=False, highlight=False)
    _follow(env, follower, wanted, kept)


def _wanted(env: Env, level: str | None, shard: str | None, message: str | None,
            since: str | None) -> LogFilter:
    """The lines the options ask for (a bad --level or --shard refused)."""
    from nereus.cli import log_view
    from nereus.errors import UsageError

    if level is not None and level not in log_view.LEVELS:
        raise UsageError(f"--level {level!r}: expected one of {', '.join(log_view.LEVELS)}")
    if shard is not None:
        shard = str(env.shard(shard))
    return log_view.LogFilter(
        level=level, shard=shard, message=message,
        since=None if since is None else log_view.since_timestamp(
            since, time.time_ns() // 1_000_000))


def _no_story(env: Env, message: str) -> str:
    """Why no line names ``message``, and where else its story is: the engine logs a
    message that publishes without trouble only at debug (``[engine] log_level``)."""
    import shlex

    from nereus.errors import NereusError

    try:
        log_level: str | None = env.config.engine.log_level
    except NereusError:
        log_level = None
    why = f"no line of the engine's log names message {message!r}: "
    if log_level != "debug":
        why += (f"the engine logs at {log_level or 'info'} ([engine] log_level), and a message "
                "that is admitted and published without trouble is logged only at debug "
                "(a decline, a failure or an UNKNOWN outcome is logged at info); set "
                '[engine] log_level = "debug" in nereus.toml to keep every message\'s story, '
                "and ")
    return why + (f"`nereus message show {shlex.quote(message)}` shows its attempts and "
                  "evidence now")


def _follow(env: Env, follower: Follower, wanted: LogFilter,
            first: list[LogLine]) -> None:
    import json
    import sys

    def show(lines: list[LogLine]) -> None:
        if env.output.json_mode:
            for line in lines:
                sys.stdout.write(json.dumps(line, default=str) + "\n")
            sys.stdout.flush()
        else:
            from nereus.cli.output import terminal_safe

            _print_lines(env.output.out, [terminal_safe(line) for line in lines])

    show(first)
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            show([line for line in follower.poll() if wanted.keeps(line)])
    except KeyboardInterrupt:
        return


def _print_lines(out: Console, lines: list[LogLine]) -> None:
    """One line per record: time, level, shard, event, then the other fields (values made
    terminal-safe by the caller)."""
    from nereus.cli.log_view import render_fields

    for line in lines:
        level = str(line.get("level", ""))
        style = _LEVEL_STYLE.get(level, "")
        stamp = str(line.get("timestamp", ""))[11:23]
        head = f"{stamp} {level.upper():<8}"
        if style:
            head = f"[{style}]{head}[/{style}]"
        shard = f" [cyan]{line['shard']}[/cyan]" if line.get("shard") else ""
        rest = render_fields(line)
        out.print(f"{head}{shard} [bold]{line.get('event', '')}[/bold]"
                  f"{' ' + rest if rest else ''}", soft_wrap=True)
