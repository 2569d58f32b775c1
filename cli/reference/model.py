"""The command tree as plain values: what man pages and completion scripts are made of.

``build(command)`` walks the Click command tree Typer builds (``typer.main.get_command``,
or the root command of a running context) once and keeps only what the renderers need,
so none of them touches Typer or Click. Hidden commands and options are left out; order
is the order in which the CLI registers them, so every rendering is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

ValueKind = Literal["none", "text", "choice", "file", "dir", "lane", "route", "shard"]

# Options whose declared type (str) hides what their value is; completions should know.
VALUE_HINTS: Mapping[str, ValueKind] = {"--home": "dir", "--lane": "lane", "--route": "route",
                                        "--shard": "shard"}
# positional arguments named for a configured name: completed from the home's nereus.toml
ARGUMENT_HINTS: Mapping[str, ValueKind] = {"lane": "lane", "route": "route", "shard": "shard",
                                           "shard_name": "shard"}

# the name of a parameter's Click type (as Typer's bundled Click spells it, or Click
# itself) -> the metavar the reference shows
_TYPE_METAVARS: Mapping[str, str] = {
    "int": "INTEGER", "int range": "INTEGER", "integer": "INTEGER", "integer range": "INTEGER",
    "float": "NUMBER", "float range": "NUMBER", "boolean": "BOOLEAN", "str": "TEXT",
    "text": "TEXT"}


@dataclass(frozen=True, slots=True)
class Param:
    """One option or positional argument of a command."""

    name: str
    kind: Literal["option", "argument"]
    opts: tuple[str, ...]  # ("--follow", "-f"); () for an argument
    metavar: str  # what the value looks like: "ID", "INTEGER", "bash|zsh|fish"; "" for a flag
    help: str
    value: ValueKind  # how a shell completes the value ("none": a flag takes none)
    choices: tuple[str, ...]
    multiple: bool
    required: bool
    default: str | None  # shown as "default: ..."; None when there is nothing to show
    envvar: str | None
    value_range: str | None  # "1..4096", ">=1"

    @property
    def takes_value(self) -> bool:
        return self.value != "none"

    @property
    def long_opts(self) -> tuple[str, ...]:
        return tuple(o for o in self.opts if o.startswith("--"))

    @property
    def short_opts(self) -> tuple[str, ...]:
        return tuple(o for o in self.opts if not o.startswith("--"))


@dataclass(frozen=True, slots=True)
class Command:
    """A command or a command group, with its path from the root (``("nereus", "lane")``)."""

    path: tuple[str, ...]
    help: str
    params: tuple[Param, ...]
    subcommands: tuple[Command, ...]
    is_group: bool

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def full_name(self) -> str:
        return " ".join(self.path)

    @property
    def key(self) -> str:
        """The words after the program name: ``"lane list"`` (the JSON-key table's key)."""
        return " ".join(self.path[1:])

    @property
    def summary(self) -> str:
        """The first paragraph of the help, on one line."""
        return " ".join(self.help.split("\n\n", 1)[0].split())

    @property
    def options(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "option")

    @property
    def arguments(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "argument")

    def walk(self) -> Iterator[Command]:
        """This command and every command below it, parents before children."""
        yield self
        for sub in self.subcommands:
            yield from sub.walk()

    def leaves(self) -> Iterator[Command]:
        """Every runnable command below (or at) this one."""
        return (c for c in self.walk() if not c.is_group)


def build(command: Any, path: tuple[str, ...] = ("nereus",)) -> Command:
    """The plain tree of a Click/Typer command (groups recurse into their commands)."""
    commands: Mapping[str, Any] = getattr(command, "commands", None) or {}
    return Command(
        path=path,
        help=_clean(command.help or ""),
        params=tuple(_param(p) for p in command.params
                     if not getattr(p, "hidden", False) and p.name != "help"),
        subcommands=tuple(build(sub, (*path, name)) for name, sub in commands.items()
                          if not sub.hidden),
        is_group=hasattr(command, "commands"),
    )


def _clean(text: str) -> str:
    """Help text with Click's no-rewrap markers dropped and paragraphs kept."""
    lines = [line.rstrip() for line in text.replace("\b\n", "").strip().splitlines()]
    return "\n".join(lines)


def _param(param: Any) -> Param:
    kind: Literal["option", "argument"] = (
        "argument" if param.param_type_name == "argument" else "option")
    choices = _choices(param.type)
    value = _value_kind(param, choices, kind)
    return Param(
        name=param.name or "",
        kind=kind,
        opts=tuple(param.opts) if kind == "option" else (),
        metavar=_metavar(param, choices, value, kind),
        help=_clean(getattr(param, "help", None) or ""),
        value=value,
        choices=choices,
        multiple=bool(param.multiple),
        required=bool(param.required),
        default=_default(param, value),
        envvar=param.envvar if isinstance(param.envvar, str) else None,
        value_range=_range(getattr(param.type, "min", None), getattr(param.type, "max", None)),
    )


def _choices(param_type: Any) -> tuple[str, ...]:
    found = getattr(param_type, "choices", None) or ()
    return tuple(str(c.value) if isinstance(c, Enum) else str(c) for c in found)


def _value_kind(param: Any, choices: tuple[str, ...], kind: str) -> ValueKind:
    if kind == "option" and getattr(param, "is_flag", False):
        return "none"
    for opt in param.opts if kind == "option" else ():
        if opt in VALUE_HINTS:
            return VALUE_HINTS[opt]
    if kind == "argument" and str(param.name) in ARGUMENT_HINTS and not choices:
        return ARGUMENT_HINTS[str(param.name)]
    if choices:
        return "choice"
    if param.type.name == "path":
        return "dir" if param.type.dir_okay and not param.type.file_okay else "file"
    return "text"


def _metavar(param: Any, choices: tuple[str, ...], value: ValueKind, kind: str) -> str:
    if value == "none":
        return ""
    if param.metavar:
        return str(param.metavar)
    if choices:
        return "|".join(choices)
    if value == "dir":
        return "DIR"
    if value == "file":
        return "PATH"
    if kind == "argument":
        return str(param.name).upper()
    return _TYPE_METAVARS.get(param.type.name, "TEXT")


def _default(param: Any, value: ValueKind) -> str | None:
    default = param.default
    if value == "none" or default is None or callable(default):
        return None
    if isinstance(default, (list, tuple)):
        return ", ".join(str(d) for d in default) or None
    if isinstance(default, Enum):
        return str(default.value)
    return str(default)


def _range(low: float | None, high: float | None) -> str | None:
    if low is not None and high is not None:
        return f"{low}..{high}"
    if low is not None:
        return f">={low}"
    if high is not None:
        return f"<={high}"
    return None
