"""``nereus completion SHELL``: print the static completion script for bash, zsh or fish.

The script is rendered by ``nereus.cli.reference`` from the running CLI's own command
tree: the same text the package installs and the repository keeps in ``completions/``.
The generator is imported only when this command runs, so ``nereus --help`` stays light.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from nereus.cli.context import Env


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(
    ctx: typer.Context,
    shell: Annotated[Shell, typer.Argument(help="The shell: bash, zsh or fish.",
                                           show_default=False)],
) -> None:
    """Print the completion script for SHELL (static: pressing TAB never starts Python).

    bash: eval "$(nereus completion bash)" in ~/.bashrc, or save it as
    ~/.local/share/bash-completion/completions/nereus. zsh: save it as _nereus in a
    directory of $fpath (before compinit runs). fish: save it as
    ~/.config/fish/completions/nereus.fish. Installed packages already ship all three.
    """
    import msgspec

    from nereus.cli.reference import completion_script
    from nereus.cli.setup_documents import CompletionScript

    env: Env = ctx.obj
    script = completion_script(shell.value)  # the whole tree, whatever this run built
    if env.output.json_mode:
        env.output.emit(msgspec.to_builtins(CompletionScript(shell=shell.value, script=script)),
                        lambda _: None)
        return
    sys.stdout.write(script)
    sys.stdout.flush()
