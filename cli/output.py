"""The one output object every command renders through.

Human output goes to stdout through Rich (colour off under ``NO_COLOR`` or when stdout is
not a terminal); with ``--json`` exactly one JSON document goes to stdout instead.
Diagnostics, warnings and progress always go to stderr, so a script reading stdout never
sees them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from nereus.errors import ExitCode, NereusError
from nereus.terminal_text import escape_controls

if TYPE_CHECKING:
    import msgspec
    from rich.console import Console

    S = TypeVar("S", bound=msgspec.Struct)


class Shown(str):
    """A string already made safe to print inside Rich markup (``safe_markup``)."""

    __slots__ = ()


def safe_markup(text: str) -> str:
    """``text`` to print inside Rich markup: control characters escaped, markup inert.
    Idempotent: a ``Shown`` string is returned as it is."""
    if isinstance(text, Shown):
        return text
    from rich.markup import escape

    return Shown(escape(escape_controls(text)))


def terminal_safe(data: Any) -> Any:
    """Make every string inside ``data`` (dicts, lists) ``safe_markup``, in place; returns
    the value to store for ``data`` itself (a new string when it is one)."""
    if isinstance(data, str):
        return safe_markup(data)
    if isinstance(data, dict):
        for key, value in data.items():
            data[key] = terminal_safe(value)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            data[index] = terminal_safe(value)
    return data


def shown(document: S) -> S:
    """A copy of the typed ``document`` with every string in it ``safe_markup``
    (``terminal_safe``): what a human renderer of a typed document prints from."""
    import msgspec

    return msgspec.convert(terminal_safe(msgspec.to_builtins(document)), type(document))


class Answered(NereusError):
    """The command has printed its whole answer (under ``--json``, its one JSON document)
    and that answer is "no" (exit 1) or not known yet (exit 6). ``nereus.cli.main`` exits
    with ``exit_code`` and prints nothing more: no error line, no second document.

    An error found *before* the answer was printed is raised as the ``NereusError`` that
    names it instead, and main prints it (under ``--json``, as the error document)."""

    def __init__(self, exit_code: ExitCode) -> None:
        super().__init__(f"answered; exit status {int(exit_code)}")
        self.exit_code = exit_code


# wide enough that no table is cut or wrapped when stdout is a pipe or a file (Rich would
# assume 80 columns); a terminal, or COLUMNS when set, keeps its own width
PIPED_WIDTH: Final = 4_096


def _piped_width() -> int | None:
    import os

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return None
    return PIPED_WIDTH


class TextForm:
    """How the ``Output`` console prints on stdout where it prints nothing a plain renderer
    cannot write itself: ``styled`` (a terminal: bold and italic as SGR sequences, as Rich
    writes them whatever its colour system, ``NO_COLOR`` too) and the ``width`` its tables
    are fitted to (``text_form``)."""

    __slots__ = ("styled", "width")

    def __init__(self, *, styled: bool, width: int) -> None:
        self.styled = styled
        self.width = width

    def __repr__(self) -> str:
        return f"TextForm(styled={self.styled}, width={self.width})"


def text_form() -> TextForm | None:
    """The ``TextForm`` Rich's ``Console`` takes on stdout here (``Output.out``), found as
    it finds it (``TTY_COMPATIBLE``, ``FORCE_COLOR``, then the stream; its width from
    ``COLUMNS``, else the first of stdin, stdout, stderr with a terminal size, else 80),
    or None where that is not certain: a dumb terminal, Windows, an encoding it would not
    draw boxes in, stdout closed."""
    import os

    environ = os.environ
    if sys.platform == "win32" or environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    if not (getattr(sys.stdout, "encoding", None) or "").lower().startswith("utf"):
        return None
    try:
        isatty = sys.stdout.isatty()
    except ValueError:  # closed
        return None
    compatible = environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        styled = compatible == "1"
    elif "FORCE_COLOR" in environ:
        styled = environ["FORCE_COLOR"] != ""
    else:
        styled = isatty
    width = _piped_width()
    if width is None:
        columns = environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() else _terminal_width()
    return TextForm(styled=styled, width=width)


def _terminal_width() -> int:
    """The width of the first of stdin, stdout and stderr that is a terminal, else 80 (as
    Rich reads it: a terminal of width 0 is 80 too)."""
    import os

    for descriptor in (0, 1, 2):
        try:
            return os.get_terminal_size(descriptor).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def controls_escaped(data: Any) -> Any:
    """A copy of ``data`` (dicts, lists) with every string's control characters escaped
    (``escape_controls``), for renderers that print without Rich."""
    if isinstance(data, str):
        return escape_controls(data)
    if isinstance(data, dict):
        return {key: controls_escaped(value) for key, value in data.items()}
    if isinstance(data, list):
        return [controls_escaped(value) for value in data]
    return data


FORMATS: Final = ("table", "json", "yaml")


def output_format(given: str | None, *, json_flag: bool, environ: Mapping[str, str]) -> str:
    """The document format a command line asks for: ``--json`` (a shorthand for ``--output
    json``), else ``--output``, else ``NEREUS_OUTPUT``, else ``table`` (for people)."""
    if json_flag:
        return "json"
    chosen = (given or environ.get("NEREUS_OUTPUT") or "table").lower()
    if chosen not in FORMATS:
        from nereus.errors import UsageError

        raise UsageError(f"--output {chosen!r}: expected one of {', '.join(FORMATS)}")
    return chosen


class Output:
    def __init__(self, *, json_mode: bool, document_format: str = "json") -> None:
        # json_mode: print one document for a program (JSON or YAML), no prompts or bars
        self.json_mode = json_mode
        self.document_format = document_format if json_mode else "table"
        self._out: Console | None = None
        self._err: Console | None = None

    @property
    def out(self) -> Console:
        if self._out is None:
            from rich.console import Console

            self._out = Console(highlight=False, soft_wrap=True, width=_piped_width())
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._err

    def emit(self, data: Mapping[str, object] | Sequence[object],
             human: Callable[[Console], None],
             plain: Callable[[Any, TextForm], str | None] | None = None) -> None:
        """One JSON document with ``--json``, unchanged; otherwise ``human`` draws for
        people, after every string in ``data`` is made terminal-safe in place
        (``terminal_safe``): renderers print the document's values inside Rich markup, so
        this is the one place that keeps escape sequences and markup in data inert.

        ``plain``, given a copy of ``data`` with control characters escaped and the form
        Rich would print in (``text_form``), returns the very characters ``human`` would
        print, or None when it cannot be sure; it spares importing Rich (a third of
        ``nereus shard inspect``'s run)."""
        if not self.json_mode and plain is not None and self._out is None:
            form = text_form()
            text = None if form is None else plain(controls_escaped(data), form)
            if text is not None:
                sys.stdout.write(text)
                sys.stdout.flush()
                return
        if self.json_mode:
            import json  # here: a table on a pipe never needs it

            text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
            if self.document_format == "yaml":
                import yaml

                # through JSON first: the same values, whatever Python type carried them
                text = yaml.safe_dump(json.loads(text), sort_keys=False, allow_unicode=True)
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            terminal_safe(data)
            human(self.out)

    def warn(self, text: str) -> None:
        self.err.print(f"[yellow]warning:[/yellow] {safe_markup(text)}")

    def error(self, text: str, hint: str | None = None) -> None:
        self.err.print(f"[red]error:[/red] {safe_markup(text)}")
        if hint:
            self.err.print(f"[dim]hint:[/dim] {safe_markup(hint)}")

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        """A progress bar on stderr (never on stdout), on a terminal and not for a program
        (``--json``, ``--output``); yields ``advance(n)``."""
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeRemainingColumn(), console=self.err, transient=True,
            disable=self.json_mode or not self.err.is_terminal,
        )
        with progress:
            task = progress.add_task(description, total=total)
            yield lambda n: progress.advance(task, n)
