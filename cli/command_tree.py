"""The ``nereus`` command tree, built for what a command line needs.

Every command lives in a module of ``nereus.cli.commands``; building the whole tree imports
all of them and has Typer read every command's signature (about half of a run's start-up).
A command line that names a command needs only that command's branch: ``build_app(name)``
imports its module and builds that branch alone, under the same root options. The whole
tree (``build_app(None)``) is built for ``nereus --help``, a line that names no known
command (so the error lists them all), shell completion and the generated reference, in
one fixed order, so help, man pages and completions read the same as ever.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Final

import typer

from nereus.cli.context import Env

_COMMANDS_PACKAGE: Final = "nereus.cli.commands"

# in the order help lists them: a top-level command (module, function) or a group (module,
# whose ``app`` is the group's Typer)
_TREE: Final[tuple[tuple[str, str, str | None], ...]] = (
    ("init", "init", "init"),
    ("quickstart", "quickstart", "quickstart"),
    ("status", "status", "status"),
    ("doctor", "doctor", "doctor"),
    ("dashboard", "dashboard", "dashboard"),
    ("completion", "completion", "completion"),
    ("engine", "engine", None),
    ("message", "message", None),
    ("shard", "shard", None),
    ("lane", "lane", None),
    ("attempt", "attempt", None),
    ("checkpoint", "checkpoint", None),
    ("recovery-set", "recovery_set", None),
    ("payload", "payload", None),
    ("mutate", "mutate", None),
    ("playbook", "playbook", None),
    ("command", "command", None),
    ("cluster", "cluster", None),
    ("upgrade", "upgrade", None),
    ("metrics", "metrics", "metrics"),
)

# commands a group lists that another module defines: group -> (name, module, function)
_BORROWED: Final[dict[str, tuple[tuple[str, str, str], ...]]] = {
    "engine": (("logs", "engine_logs", "logs"),),
    "shard": (("pause", "mutate", "shard_pause"), ("resume", "mutate", "shard_resume"),
              ("move", "cluster.moves", "shard_move")),
    "message": (("break", "mutate", "message_break"),),
}

NAMES: Final = frozenset(name for name, _, _ in _TREE)

_groups: dict[str, typer.Typer] = {}


def _module(name: str) -> Any:
    return importlib.import_module(f"{_COMMANDS_PACKAGE}.{name}")


def _group(name: str, module: str) -> typer.Typer:
    """The group's Typer with its borrowed commands added (once per process)."""
    group = _groups.get(name)
    if group is None:
        group = _module(module).app
        assert isinstance(group, typer.Typer)
        for command, source, function in _BORROWED.get(name, ()):
            group.command(command)(getattr(_module(source), function))
        _groups[name] = group
    return group


def root_options(
    ctx: typer.Context,
    home: Annotated[str | None, typer.Option(
        "--home", help="Home directory (default: $NEREUS_HOME, then ./.nereus).",
        envvar="NEREUS_HOME", show_envvar=True)] = None,
    json_output: Annotated[bool, typer.Option(
        "--json", help="Print exactly one JSON document on stdout (--output json).",
    )] = False,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="table|json|yaml", show_default=False,
        help="table for people (default), or one JSON or YAML document on stdout (also "
        "NEREUS_OUTPUT).")] = None,
) -> None:
    """The options every command takes: its home and its output."""
    ctx.obj = Env.from_options(home, json_output=json_output, output=output)
    ctx.call_on_close(ctx.obj.close)


def build_app(only: str | None = None) -> typer.Typer:
    """The root Typer with its options and every command, or only the branch named
    ``only`` (one of ``NAMES``)."""
    app = typer.Typer(
        name="nereus",
        help="Nereus Delay: durable delayed-message scheduling for Kafka and Pulsar.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback()(root_options)
    for name, module, function in _TREE:
        if only is not None and name != only:
            continue
        if function is None:
            app.add_typer(_group(name, module), name=name)
        else:
            app.command(name)(getattr(_module(module), function))
    return app


def named_command(args: list[str]) -> str | None:
    """The command a command line names (its first word after the root options, which
    ``main`` has moved to the front), if it is one of ``NAMES``."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--home":
            index += 2
            continue
        if arg == "--json" or arg.startswith("--home="):
            index += 1
            continue
        return arg if arg in NAMES else None
    return None
