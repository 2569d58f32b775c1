"""The console script's lean paths: command lines answered without Typer or the command tree.

``lean_line`` reads a line only when it is plainly ``shard inspect SHARD`` with ``--db``
and the root options (``--home``, ``--json``, ``--output``/``-o``, anywhere, ``--name value``
or ``--name=value``); anything else returns None and goes to the full app, so what a line
does never depends on which path read it. Behind it runs the command's one implementation
(``nereus.cli.shard_offline.inspect_shard``) under the same root options
(``Env.from_options``) and ending (``nereus.cli.edge``); an interrupted or broken-pipe run
exits as Click would (130, or 1). A run that answered ends with ``os._exit`` once flushed.
``NEREUS_LEAN=off`` turns it off; nothing here imports Typer, nor Rich for ``--json``.
Why: ``docs/decisions/0015-lean-inspect-path.md``.
"""

import sys
from typing import Final, NamedTuple, NoReturn

_VALUED: Final = frozenset({"--home", "--output", "-o", "--db"})
_VALUED_LONG: Final = frozenset({"--home", "--output", "--db"})  # --name=value (not -o=)


class InspectLine(NamedTuple):
    """``nereus shard inspect`` as read from a command line: the root options and its own
    (a NamedTuple: a fifth of a dataclass's cost to define, and this runs at every start;
    the module has no ``from __future__ import annotations``, which would have typing
    compile each field's annotation from its string, a millisecond of every start)."""

    shard: str
    db: str | None
    home: str | None  # --home as given (the last one), None when not on the line
    json_output: bool
    output: str | None


def lean_line(args: list[str]) -> InspectLine | None:
    """``args`` (the line after ``nereus``) read as ``shard inspect``, or None: not that
    command, or not in a form read with certainty here (module docstring)."""
    words: list[str] = []
    given: dict[str, str] = {}
    json_output = False
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--json":
            json_output = True
            continue
        if not arg.startswith("-"):
            words.append(arg)
            continue
        if arg in _VALUED:
            if index == len(args):
                return None
            name, value = arg, args[index]
            index += 1
        else:
            name, equals, value = arg.partition("=")
            if name not in _VALUED_LONG or not equals:
                return None
        if not value or value.startswith("-"):
            return None
        if name == "--db" and words[:2] != ["shard", "inspect"]:
            return None  # --db is inspect's own: before it, the parser refuses it
        given["--output" if name == "-o" else name] = value
    if len(words) != 3 or words[:2] != ["shard", "inspect"]:
        return None
    return InspectLine(shard=words[2], db=given.get("--db"), home=given.get("--home"),
                       json_output=json_output, output=given.get("--output"))


def run_lean(args: list[str]) -> None:
    """Answer ``args`` here and exit, if ``lean_line`` reads it; else return at once."""
    line = lean_line(args)
    if line is not None:
        _inspect(line, args)


def import_msgspec_alone() -> None:
    """Import msgspec without ``typing_extensions``, unless either is loaded already.

    msgspec imports ``typing_extensions`` when it can, only to recognise that package's
    annotation forms (its ``get_type_hints``, ``Required``/``NotRequired``, ``TypedDict``)
    beside ``typing``'s; and ``typing_extensions`` imports ``inspect`` with ``ast``, ``dis``
    and ``tokenize``: 6 of the 16 ms msgspec took to import, a tenth of ``shard inspect``.
    The lean path's Structs use ``typing``'s forms only (Python 3.11 has them all), so
    msgspec is imported here with the package hidden (msgspec falls back to ``typing``'s
    own, as it does where ``typing_extensions`` is not installed), which is unhidden at
    once: anything imported later finds it as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # "not installed"
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules["typing_extensions"]


def _inspect(line: InspectLine, argv: list[str]) -> NoReturn:
    import errno
    import os
    from pathlib import Path

    import_msgspec_alone()
    from nereus.cli.context import Env
    from nereus.cli.edge import exit_crashed, exit_with_error, hoist_global_options, prepare_process
    from nereus.cli.shard_offline import inspect_shard
    from nereus.errors import NereusError

    prepare_process(library_logs=False)  # this line loads no library that logs
    args = hoist_global_options(argv)
    try:
        home = line.home if line.home is not None else os.environ.get("NEREUS_HOME") or None
        env = Env.from_options(home, json_output=line.json_output, output=line.output)
        try:
            inspect_shard(env, line.shard, None if line.db is None else Path(line.db))
        finally:
            env.close()
        sys.stdout.flush()
        sys.stderr.flush()
    except NereusError as exc:
        exit_with_error(exc, args)
    except KeyboardInterrupt:
        sys.exit(130)
    except EOFError:
        sys.stderr.write("\n")
        sys.exit(130)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            exit_crashed(exc, args)
        # stdout closed under us: exit 1 quietly, as Click does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except Exception as exc:
        exit_crashed(exc, args)
    # done, everything written and closed: skip the interpreter's teardown (modules, the
    # RocksDB environment's threads), a fifth of the run; there is nothing left to finalise
    os._exit(0)
