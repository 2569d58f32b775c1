"""The ``nereus`` entry point: the command line's way to its command (the tree is built
for it by ``nereus.cli.command_tree``), and the one place where errors become exit codes.
A ``NereusError`` is printed (under ``--json`` as the one error document) and exits with
its class's code; ``Answered`` (``nereus.cli.output``) comes from a command that already
printed its answer, so only its status is left to set.

Imports here stay light: ``nereus --help`` must not import textual, boto3 or broker
clients (a test checks ``sys.modules``). Command modules import what they need inside
their functions, and a command line imports only the module of the command it names.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import typer

from nereus.cli.context import resolve_home
from nereus.cli.output import Answered, Output, output_format
from nereus.errors import ExitCode, NereusError


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole command tree (``nereus.cli.command_tree``), for the reference
    generator and tests that walk it."""
    if name == "app":
        from nereus.cli.command_tree import build_app

        return build_app()
    raise AttributeError(name)


def _hoist_global_options(argv: list[str]) -> list[str]:
    """Accept ``--json`` and ``--home`` anywhere on the line, as operators type them."""
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


def _document_format(argv: list[str]) -> str:
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


def _json_requested(argv: list[str]) -> bool:
    return _document_format(argv) != "table"


def _output(argv: list[str]) -> Output:
    chosen = _document_format(argv)
    return Output(json_mode=chosen != "table", document_format=chosen)


def _quiet_libraries() -> None:
    """Library log lines (librdkafka's through confluent-kafka, boto3, urllib3) stay out of
    a command's output: a handler on the root logger keeps Python's last-resort handler
    from printing them to stderr. The command says what went wrong itself; the engine, in
    the foreground or as the daemon, puts its own handlers on the root logger."""
    import logging

    logging.getLogger().addHandler(logging.NullHandler())


def main(argv: list[str] | None = None) -> None:
    from nereus.adapters.private_files import enter_private_mode

    enter_private_mode()
    _quiet_libraries()
    args = _hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    try:
        from nereus.cli.command_tree import build_app, named_command

        app = build_app(named_command(args))
        code = app(args=args, prog_name="nereus", standalone_mode=False)
    except Answered as exc:  # the command printed its answer: only the status is left
        sys.exit(int(exc.exit_code))
    except NereusError as exc:
        output = _output(args)
        if output.json_mode:
            from nereus.cli.error_document import ErrorDocument, error_document

            output.emit(error_document(ErrorDocument(
                error=exc.message, hint=exc.hint, exit_code=int(exc.exit_code)), exc.document),
                lambda _: None)
        output.error(exc.message, exc.hint)
        sys.exit(int(exc.exit_code))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if isinstance(exc, typer.Abort):
            sys.exit(130)
        click = _click_exceptions()
        if isinstance(exc, click.ClickException):
            usage = isinstance(exc, click.UsageError)
            code = int(ExitCode.USAGE if usage else exc.exit_code)
            if _json_requested(args):
                from nereus.cli.error_document import ErrorDocument, error_document

                _output(args).emit(error_document(ErrorDocument(
                    error=exc.format_message(), hint=_usage_hint(exc), exit_code=code)),
                    lambda _: None)
            exc.show()
            sys.exit(code)
        _crashed(exc, args)
    sys.exit(code if isinstance(code, int) else 0)


def _crashed(exc: Exception, args: list[str]) -> NoReturn:
    """A bug: one line on stderr, the traceback in a crash file, the JSON error document
    under ``--json``, exit 70."""
    from nereus.cli.crash import write_crash_file

    path = write_crash_file(exc, resolve_home(_home_option(args)), args)
    where = f"the traceback is in {path}" if path is not None else "no crash file could be written"
    message = f"internal error ({type(exc).__name__}): {str(exc)[:200]}"
    hint = f"{where}; please report it with that file"
    output = _output(args)
    if output.json_mode:
        from nereus.cli.error_document import ErrorDocument, error_document

        output.emit(error_document(ErrorDocument(
            error=message, hint=hint, exit_code=int(ExitCode.INTERNAL),
            crash_file=None if path is None else str(path))), lambda _: None)
    output.error(message, hint)
    sys.exit(int(ExitCode.INTERNAL))


def _home_option(args: list[str]) -> str | None:
    """The ``--home`` of a command line already hoisted (the globals come first)."""
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--home" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--home="):
            return arg.split("=", 1)[1]
    return None


def _usage_hint(exc: Any) -> str:
    """Where to read the usage of the command a parser error is about."""
    context = getattr(exc, "ctx", None)
    if context is None or context.parent is None:
        return "run `nereus --help` for the commands"
    return f"run `{context.command_path} --help` for its options"


def _click_exceptions() -> Any:
    """The exceptions of the Click that Typer parses with: Typer >= 0.29 bundles its own
    (``typer._click``; Click itself may not even be installed), older Typer uses Click's."""
    import importlib

    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:
        return importlib.import_module("click.exceptions")
