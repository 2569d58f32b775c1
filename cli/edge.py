"""Where a command line meets the process, without Typer: what ``nereus.cli.main`` (the
whole command tree) and the console script's lean paths (``nereus.cli.lean``) share.

The global options are accepted anywhere on the line (``hoist_global_options``); the
process creates its files private and keeps library log lines off the terminal
(``prepare_process``); and an error becomes its exit status here, printed once, under
``--json`` as the one error document (``exit_with_error``, ``exit_crashed``). Nothing here
imports Typer or Rich at module level: the lean paths must stay light.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from nereus.cli.context import resolve_home
from nereus.cli.output import Output, output_format
from nereus.errors import ExitCode, NereusError


def hoist_global_options(argv: list[str]) -> list[str]:
    """Accept ``--json``, ``--output`` and ``--home`` anywhere on the line, as operators type
    them: they are moved to the front, in the order given (``--`` ends the hoisting)."""
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            rest.extend(argv[index:])
            break
        if arg == "--json":
            front.append(arg)
        elif arg in ("--output", "-o") and index + 1 < len(argv):
            front.extend(argv[index:index + 2])
            index += 1
        elif arg.startswith("--output="):
            front.append(arg)
        elif arg == "--home" and index + 1 < len(argv):
            front.extend(argv[index:index + 2])
            index += 1
        elif arg.startswith("--home="):
            front.append(arg)
        else:
            rest.append(arg)
        index += 1
    return front + rest


def document_format(argv: list[str]) -> str:
    """The format an error document takes: what the (hoisted) line asked for; an unknown
    --output is reported as a table (its own usage error)."""
    given = None
    for index, arg in enumerate(argv):
        if arg in ("--output", "-o") and index + 1 < len(argv):
            given = argv[index + 1]
        elif arg.startswith("--output="):
            given = arg.split("=", 1)[1]
    try:
        return output_format(given, json_flag="--json" in argv, environ=os.environ)
    except NereusError:
        return "table"


def error_output(argv: list[str]) -> Output:
    """The output an error of the (hoisted) line ``argv`` is printed through."""
    chosen = document_format(argv)
    return Output(json_mode=chosen != "table", document_format=chosen)


def prepare_process(*, library_logs: bool = True) -> None:
    """Before any command runs: files born private (``docs/safety.md`` §1), and library log
    lines (librdkafka's through confluent-kafka, boto3, urllib3) kept out of the output: a
    handler on the root logger keeps Python's last-resort handler from printing them to
    stderr. The command says what went wrong itself; the engine, in the foreground or as
    the daemon, puts its own handlers on the root logger. ``library_logs=False``: a line
    that loads no library logging through Python (the lean ``shard inspect``: rocksdict
    logs to RocksDB's own LOG file) skips importing ``logging``, a twentieth of its run."""
    from nereus.adapters.home.private_files import enter_private_mode

    enter_private_mode()
    if library_logs:
        import logging

        logging.getLogger().addHandler(logging.NullHandler())


def exit_with_error(exc: NereusError, args: list[str]) -> NoReturn:
    """Print ``exc`` once and exit with its class's code; ``args`` is the hoisted command
    line. For a program (``--json``, ``--output json|yaml``) the error is the one document
    on stdout, with nothing on stderr (``/work/shared/CLI.md``: one document, nothing
    else); for a person it is ``error:`` and ``hint:`` on stderr, with nothing on stdout."""
    output = error_output(args)
    if output.json_mode:
        from nereus.cli.error_document import ErrorDocument, error_document

        output.emit(error_document(ErrorDocument(
            error=exc.message, hint=exc.hint, exit_code=int(exc.exit_code)), exc.document),
            lambda _: None)
    else:
        output.error(exc.message, exc.hint)
    sys.exit(int(exc.exit_code))


def exit_crashed(exc: Exception, args: list[str]) -> NoReturn:
    """A bug: one line on stderr, the traceback in a crash file, the JSON error document
    under ``--json`` too (the contract says so for exit 70: whoever runs a script sees that
    it crashed), exit 70."""
    from nereus.cli.crash import write_crash_file

    path = write_crash_file(exc, resolve_home(home_option(args)), args)
    where = f"the traceback is in {path}" if path is not None else "no crash file could be written"
    message = f"internal error ({type(exc).__name__}): {str(exc)[:200]}"
    hint = f"{where}; please report it with that file"
    output = error_output(args)
    if output.json_mode:
        from nereus.cli.error_document import ErrorDocument, error_document

        output.emit(error_document(ErrorDocument(
            error=message, hint=hint, exit_code=int(ExitCode.INTERNAL),
            crash_file=None if path is None else str(path))), lambda _: None)
    output.error(message, hint)
    sys.exit(int(ExitCode.INTERNAL))


def home_option(args: list[str]) -> str | None:
    """The ``--home`` of a command line already hoisted (the globals come first)."""
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--home" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--home="):
            return arg.split("=", 1)[1]
    return None
