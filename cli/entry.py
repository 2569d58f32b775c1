"""The ``nereus`` console script: ``nereus --help`` from its pre-rendered text, the lines
``nereus.cli.lean`` reads with certainty (``shard inspect``) without Typer, anything else
through ``nereus.cli.main``.

Rendering the root help means importing Typer and every command module and having Typer
read every signature: about ten times the cost of starting Python. The text only changes
when the command tree does, so ``scripts/gen-reference`` renders it with the rest of the
reference (``cli/help/nereus.txt``), and its ``--check`` (a test) holds the file to the live
rendering. The help is Click's plain text, at most 80 columns wide whatever the terminal,
so the file is what the live rendering prints wherever there are at least 80 columns
(``COLUMNS``, else the terminal's, else 80); narrower, and for any other command line, it
is rendered live. ``NEREUS_HELP_CACHE=off`` turns the file off, ``NEREUS_LEAN=off`` the
lean paths.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TextIO

HELP_DIR: Final = Path(__file__).resolve().parent / "help"
HELP_FILE: Final = "nereus.txt"
WIDTH: Final = 80  # Click's help is never wider


def cached_root_help(args: list[str], environ: Mapping[str, str], stdout: TextIO) -> str | None:
    """The pre-rendered ``nereus --help``, or None to render it live (module docstring)."""
    if args != ["--help"] or environ.get("NEREUS_HELP_CACHE") == "off":
        return None
    columns = environ.get("COLUMNS")
    if columns is not None:
        if not columns.isdigit() or int(columns) < WIDTH:
            return None
    elif stdout.isatty():
        try:
            if os.get_terminal_size(stdout.fileno()).columns < WIDTH:
                return None
        except OSError:
            return None
    try:
        return (HELP_DIR / HELP_FILE).read_text(encoding="utf-8")
    except OSError:
        return None


def main() -> None:
    args = sys.argv[1:]
    text = cached_root_help(args, os.environ, sys.stdout)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if os.environ.get("NEREUS_LEAN") != "off":
        from nereus.cli.lean import run_lean

        run_lean(args)  # exits when it answered the line
    from nereus.cli.main import main as run

    run()
