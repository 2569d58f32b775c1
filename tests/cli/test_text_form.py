"""``text_form`` (``cli/output.py``) finds the form Rich's console takes on stdout — a
terminal or not, and the width its tables are fitted to — as Rich finds it, for each way
an operator's stdout and environment can be set; it declines where it cannot be sure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.terminal import on_terminal

# the program prints, on stderr, what Rich's console of ``Output`` and ``text_form`` see
PROGRAM = """
import json, sys
from nereus.cli.output import Output, text_form
console = Output(json_mode=False).out
form = text_form()
json.dump({"rich": [console.color_system is not None, console.width],
           "form": None if form is None else [form.styled, form.width]}, sys.stderr)
"""
_RICH_ENVIRON = ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "TERM",
                 "COLORTERM")

CASES: dict[str, tuple[bool, dict[str, str]]] = {
    "pipe": (False, {}),
    "pipe-columns": (False, {"COLUMNS": "100"}),
    "pipe-columns-not-a-number": (False, {"COLUMNS": "wide"}),
    "pipe-force-color": (False, {"FORCE_COLOR": "1"}),
    "pipe-force-color-empty": (False, {"FORCE_COLOR": ""}),
    "pipe-tty-compatible": (False, {"TTY_COMPATIBLE": "1", "COLUMNS": "90"}),
    "terminal": (True, {"TERM": "xterm-256color"}),
    "terminal-no-color": (True, {"TERM": "xterm", "NO_COLOR": "1"}),
    "terminal-columns": (True, {"TERM": "xterm", "COLUMNS": "90"}),
    "terminal-truecolor": (True, {"TERM": "xterm", "COLORTERM": "truecolor"}),
    "terminal-not-compatible": (True, {"TERM": "xterm", "TTY_COMPATIBLE": "0"}),
    "terminal-dumb": (True, {"TERM": "dumb"}),
}


@pytest.mark.parametrize("name", CASES)
def test_text_form_is_the_form_rich_takes(name: str) -> None:
    """Through a pipe (with COLUMNS, FORCE_COLOR, TTY_COMPATIBLE) and on a 132-column
    terminal (any TERM, NO_COLOR, COLUMNS, TTY_COMPATIBLE=0): ``text_form`` is styled
    exactly where Rich has a colour system and has Rich's width; it declines only on a
    dumb terminal."""
    terminal, extra = CASES[name]
    env = {k: v for k, v in os.environ.items() if k not in _RICH_ENVIRON}
    env.update(extra)
    argv = [sys.executable, "-c", PROGRAM]
    if terminal:
        code, _, err = on_terminal(argv, env, columns=132)
    else:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                              check=False)
        code, err = done.returncode, done.stderr
    assert code == 0, err
    seen = json.loads(err)
    if name == "terminal-dumb":
        assert seen["form"] is None
    else:
        assert seen["form"] == seen["rich"]
    if name == "terminal":
        assert seen["form"] == [True, 132]
