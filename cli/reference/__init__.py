"""Man pages and shell completions generated from the CLI's own definitions.

One walk of the Typer command tree (``model.build``) feeds every output, so ``man/`` and
``completions/`` can never describe options the parser does not have: ``man/nereus.1`` and
``man/nereus-<command>.1`` (``man.py``, with the ``--json`` keys of ``nereus.cli.json_keys``),
and static completion scripts for bash, zsh and fish (``bash.py``, ``zsh.py``,
``fish.py``). ``nereus completion SHELL`` prints the same text the files hold. Output
carries no dates and follows the CLI's registration order, so regenerating an unchanged
CLI gives the same bytes: ``tests/cli/test_reference.py`` regenerates and compares, and
``make reference`` (``python -m nereus.cli.reference --write``) refreshes the files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nereus.cli.json_keys import JSON_KEYS
from nereus.cli.reference import bash, fish, zsh
from nereus.cli.reference.man import man_pages
from nereus.cli.reference.model import Command, build

SHELLS: tuple[str, ...] = ("bash", "zsh", "fish")

# Where each shell's script lives in the repository (and, installed, under share/).
COMPLETION_FILES: Mapping[str, str] = {
    "bash": "completions/nereus.bash",
    "zsh": "completions/_nereus",
    "fish": "completions/nereus.fish",
}

_RENDERERS: Mapping[str, Callable[[Command], str]] = {
    "bash": bash.render, "zsh": zsh.render, "fish": fish.render,
}

MAN_DIR = "man"


def root_command() -> Any:
    """The Click command Typer builds from the whole ``nereus`` command tree."""
    import typer

    from nereus.cli.command_tree import build_app

    return typer.main.get_command(build_app())


def tree(command: Any | None = None) -> Command:
    """The plain command tree of ``command`` (default: the ``nereus`` CLI)."""
    return build(root_command() if command is None else command)


def completion_script(shell: str, command: Any | None = None) -> str:
    """The static completion script for ``shell`` (one of ``SHELLS``)."""
    return _RENDERERS[shell](tree(command))


def generate(command: Any | None = None) -> dict[str, str]:
    """Every generated file: path relative to the repository root -> its text (for the
    ``nereus`` CLI itself, its pre-rendered root help too: ``nereus.cli.entry``)."""
    root = tree(command)
    files = {f"{MAN_DIR}/{name}": text for name, text in man_pages(root, JSON_KEYS).items()}
    files.update({COMPLETION_FILES[shell]: _RENDERERS[shell](root) for shell in SHELLS})
    if command is None:
        files.update(root_help_files())
    return dict(sorted(files.items()))


def root_help_files() -> dict[str, str]:
    """``nereus --help`` as it renders at 80 columns (``nereus.cli.entry``), rendered in a
    child process as a command line would be."""
    import os
    import subprocess
    import sys

    from nereus.cli.entry import HELP_FILE, WIDTH

    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    environ["COLUMNS"] = str(WIDTH)
    done = subprocess.run(
        [sys.executable, "-c", "from nereus.cli.main import main; main(['--help'])"],
        env=environ, capture_output=True, text=True, check=True, timeout=120)
    return {f"{HELP_DIR}/{HELP_FILE}": done.stdout}


HELP_DIR = "cli/help"


def _generated_on_disk(target: Path) -> set[str]:
    """Files under ``target`` this generator owns (``man/nereus*.1`` and the scripts)."""
    found = {f"{MAN_DIR}/{p.name}" for p in (target / MAN_DIR).glob("nereus*.1")}
    found |= {f"{HELP_DIR}/{p.name}" for p in (target / HELP_DIR).glob("nereus.*")}
    return found | {path for path in COMPLETION_FILES.values() if (target / path).exists()}


def differences(target: Path, files: Mapping[str, str]) -> list[str]:
    """What differs between ``files`` and the tree at ``target``: ``changed``, ``missing``
    and ``stale`` (a generated file the CLI no longer produces) entries, sorted."""
    out = []
    for path, text in files.items():
        on_disk = target / path
        if not on_disk.exists():
            out.append(f"missing {path}")
        elif on_disk.read_bytes() != text.encode():
            out.append(f"changed {path}")
    out += [f"stale {path}" for path in sorted(_generated_on_disk(target) - files.keys())]
    return out


def write(target: Path, files: Mapping[str, str]) -> list[str]:
    """Write ``files`` under ``target`` and delete stale generated files; return what
    changed."""
    changes = differences(target, files)
    for path, text in files.items():
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        if not destination.exists() or destination.read_bytes() != text.encode():
            destination.write_bytes(text.encode())
    for path in _generated_on_disk(target) - files.keys():
        (target / path).unlink()
    return changes
