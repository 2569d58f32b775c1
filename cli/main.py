"""The ``nereus`` entry point: the command line's way to its command (the tree is built
for it by ``nereus.cli.command_tree``), and the one place where errors become exit codes
(with ``nereus.cli.edge``, which the console script's lean paths share). A
``NereusError`` is printed (under ``--json`` as the one error document) and exits with
its class's code; ``Answered`` (``nereus.cli.output``) comes from a command that already
printed its answer, so only its status is left to set.

Imports here stay light: ``nereus --help`` must not import textual, boto3 or broker
clients (a test checks ``sys.modules``). Command modules import what they need inside
their functions, and a command line imports only the module of the command it names.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from nereus.cli.edge import (
    document_format,
    error_output,
    exit_crashed,
    exit_with_error,
    hoist_global_options,
    prepare_process,
)
from nereus.cli.output import Answered
from nereus.errors import ExitCode, NereusError


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole command tree (``nereus.cli.command_tree``), for the reference
    generator and tests that walk it."""
    if name == "app":
        from nereus.cli.command_tree import build_app

        return build_app()
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> None:
    prepare_process()
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    try:
        from nereus.cli.command_tree import build_app, named_command

        app = build_app(named_command(args))
        code = app(args=args, prog_name="nereus", standalone_mode=False)
    except Answered as exc:  # the command printed its answer: only the status is left
        sys.exit(int(exc.exit_code))
    except NereusError as exc:
        exit_with_error(exc, args)
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
            if document_format(args) != "table":  # one document, nothing on stderr
                from nereus.cli.error_document import ErrorDocument, error_document

                error_output(args).emit(error_document(ErrorDocument(
                    error=exc.format_message(), hint=_usage_hint(exc), exit_code=code)),
                    lambda _: None)
            else:
                exc.show()
            sys.exit(code)
        exit_crashed(exc, args)
    sys.exit(code if isinstance(code, int) else 0)


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
