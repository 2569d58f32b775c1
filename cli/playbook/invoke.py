"""One ``nereus`` command of a playbook step, run as an operator would run it.

The step runs the installed CLI in a subprocess, ``nereus --home HOME --json ARGS``, and
reads the one JSON document it prints on stdout. A subprocess (not an in-process call)
because that is the contract the step promises: the same command, the same exit statuses
and the same output an operator sees, with no state shared with the runner. Every command
has a deadline; a command still running at it is killed and counts as failed. Its stdin is
/dev/null: a command that wanted to ask something fails instead of hanging the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

_STDERR_TAIL = 2_000


@dataclass(frozen=True, slots=True)
class Invocation:
    args: tuple[str, ...]  # what came after `nereus --home HOME --json`
    home: str
    exit_code: int | None  # None: it did not finish (deadline, could not start)
    output: Any  # the JSON document on stdout, None when there was none
    stderr: str  # the end of what it wrote on stderr
    elapsed_ms: int
    problem: str | None = None  # why exit_code or output is missing

    def error_text(self) -> str:
        """The command's own explanation of a failure: its JSON error, else stderr."""
        if self.problem:
            return self.problem
        if isinstance(self.output, dict) and isinstance(self.output.get("error"), str):
            hint = self.output.get("hint")
            return str(self.output["error"]) + (f" (hint: {hint})" if hint else "")
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return lines[-1] if lines else "no error message"


class Invoke(Protocol):
    def __call__(self, args: Sequence[str], *, home: str, timeout_ms: int) -> Invocation: ...


def nereus_command() -> list[str]:
    """The installed ``nereus`` next to this interpreter (the same installation), else a
    ``python -c`` call of the same entry point."""
    script = Path(sys.executable).parent / "nereus"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("nereus")
    if found:
        return [found]
    return [sys.executable, "-c", "from nereus.cli.main import main; main()"]


def parse_output(stdout: str) -> tuple[Any, str | None]:
    """The one JSON document of ``stdout`` (None and a reason when it is not one)."""
    if not stdout.strip():
        return None, None
    try:
        return json.loads(stdout), None
    except json.JSONDecodeError as exc:
        return None, f"stdout is not one JSON document ({exc.msg} at line {exc.lineno})"
    except RecursionError:
        return None, "stdout is a JSON document nested too deeply to read"


class SubprocessInvoke:
    """Runs ``nereus`` in a subprocess; the child never outlives the call."""

    def __init__(self, command: Sequence[str] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.command = list(command) if command is not None else nereus_command()
        base = dict(os.environ if env is None else env)
        base.pop("NEREUS_OUTPUT", None)  # --json says it; nothing else must change the output
        base["NO_COLOR"] = "1"
        self.env = base

    def __call__(self, args: Sequence[str], *, home: str, timeout_ms: int) -> Invocation:
        # --home=HOME is one word: a home that starts with "-" is still the home
        argv = [*self.command, f"--home={home}", "--json", *args]
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=self.env)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in an argument
            return Invocation(tuple(args), home, None, None, "", 0,
                              f"could not start {argv[0]}: {exc}")
        problem = None
        try:
            stdout, stderr = proc.communicate(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            problem = f"still running after {timeout_ms / 1000:g} s: killed"
        finally:
            if proc.poll() is None:  # interrupted (Ctrl-C): the child goes with us
                proc.kill()
                proc.wait()
        elapsed = int((time.monotonic() - started) * 1000)
        output, unreadable = parse_output(stdout)
        code = None if problem else proc.returncode
        return Invocation(tuple(args), home, code, output, stderr[-_STDERR_TAIL:], elapsed,
                          problem or unreadable)
