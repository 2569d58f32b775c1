"""Static completion scripts: each shell loads its script and completes real command lines;
``nereus completion SHELL`` prints exactly the committed script."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from nereus.cli.reference import COMPLETION_FILES, tree
from tests.conftest import run_nereus

ROOT = Path(__file__).resolve().parents[2]
BASH = ROOT / COMPLETION_FILES["bash"]
ZSH = ROOT / COMPLETION_FILES["zsh"]
FISH = ROOT / COMPLETION_FILES["fish"]

needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")

# Drives an interactive zsh in a pseudo-terminal, presses TAB after the line and prints
# every match compadd receives ("HIT<match>"); the markers are split in the source so the
# terminal's echo of these lines never matches.
ZSH_CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=''"
zpty -w z "fpath=($1 \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "zstyle ':completion:*' list-grouped false; zstyle ':completion:*' insert-tab false"
zpty -w z "bindkey '^I' complete-word"
zpty -w z 'compadd () { typeset -a h; builtin compadd -A h "$@"; local m
  for m in $h; do print -r -- "HIT""<$m>"; done; builtin compadd "$@" }'
zpty -w z "done-mark () { print -r -- 'DONE''-MARK' }; comppostfuncs=( done-mark )"
zpty -w z "$2"$'\t'
local out
zpty -r z out '*DONE-MARK*'
print -r -- "$out"
zpty -d z
"""


def _subcommands(*path: str) -> set[str]:
    node = tree()
    for word in path:
        (node,) = [c for c in node.subcommands if c.name == word]
    return {c.name for c in node.subcommands}


def _bash_complete(*words: str, cwd: Path | None = None) -> list[str]:
    """What ``_nereus`` offers with the cursor at the end of ``words`` (last may be '')."""
    script = (f"source {shlex.quote(str(BASH))}\n"
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              "_nereus\n"
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                          text=True, cwd=cwd, check=True, timeout=30)
    return [line for line in done.stdout.splitlines() if line]


def test_bash_accepts_the_script() -> None:
    """``bash -n`` parses the committed script."""
    checked = subprocess.run(["bash", "-n", str(BASH)], capture_output=True, text=True,
                             check=False)
    assert checked.returncode == 0, checked.stderr


def test_bash_completes_subcommands_options_and_values(tmp_path: Path) -> None:
    """TAB offers a group's subcommands (lane -> close), a command's options, Enum choices
    and files for Path values, skipping global options and their values on the way."""
    lane = _bash_complete("nereus", "lane", "")
    assert "close" in lane
    assert set(lane) == _subcommands("lane")
    assert set(_bash_complete("nereus", "--home", "/tmp", "--json", "shard", "l")) == {
        "list", "log"}
    assert set(_bash_complete("nereus", "shard", "log", "default/0", "--f")) == {
        "--from", "--follow"}
    assert _bash_complete("nereus", "completion", "") == ["bash", "zsh", "fish"]
    (tmp_path / "payload.bin").write_bytes(b"x")
    (tmp_path / "dir").mkdir()
    assert set(_bash_complete("nereus", "message", "schedule", "--payload-file", "",
                              cwd=tmp_path)) == {"payload.bin", "dir"}
    assert _bash_complete("nereus", "--home", "", cwd=tmp_path) == ["dir"]
    assert _bash_complete("nereus", "engine", "start", "--timeout", "") == []


@needs_zsh
def test_zsh_loads_the_function_and_completes(tmp_path: Path) -> None:
    """zsh parses ``_nereus``; autoloaded from $fpath it completes ``nereus lane `` with the
    lane subcommands and ``nereus completion `` with the shells."""
    checked = subprocess.run(["zsh", "-n", str(ZSH)], capture_output=True, text=True,
                             check=False)
    assert checked.returncode == 0, checked.stderr
    assert ZSH.read_text().startswith("#compdef nereus\n")
    functions = tmp_path / "functions"
    functions.mkdir()
    shutil.copy(ZSH, functions / "_nereus")

    def complete(line: str) -> set[str]:
        done = subprocess.run(["zsh", "-f", "-c", ZSH_CAPTURE, "capture", str(functions), line],
                              capture_output=True, text=True, check=False, timeout=60,
                              cwd=tmp_path, env={"HOME": str(tmp_path), "TERM": "dumb",
                                                 "PATH": "/usr/bin:/bin"})
        return set(re.findall(r"HIT<([^>]*)>", done.stdout))

    assert "close" in complete("nereus lane ")
    assert complete("nereus lane ") == _subcommands("lane")
    assert complete("nereus completion ") == {"bash", "zsh", "fish"}
    assert complete("nereus --json shard log x --f") == {"--follow", "--from"}


@needs_fish
def test_fish_loads_the_script_and_completes() -> None:
    """fish parses the script and ``complete -C`` offers the lane subcommands after
    ``nereus lane`` and the options of ``shard log``."""
    checked = subprocess.run(["fish", "--no-execute", str(FISH)], capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stderr

    def complete(line: str) -> set[str]:
        done = subprocess.run(["fish", "--no-config", "-c",
                               f"source {shlex.quote(str(FISH))}; complete -C {shlex.quote(line)}"],
                              capture_output=True, text=True, check=True, timeout=30)
        return {row.split("\t")[0] for row in done.stdout.splitlines() if row}

    assert "close" in complete("nereus lane ")
    assert complete("nereus lane ") == _subcommands("lane")
    assert complete("nereus shard log x --f") == {"--from", "--follow"}
    assert complete("nereus completion ") == {"bash", "zsh", "fish"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_command_prints_the_committed_script(shell: str) -> None:
    """``nereus completion SHELL`` prints the installed file byte for byte; with --json the
    same text is the ``script`` of one document."""
    committed = (ROOT / COMPLETION_FILES[shell]).read_text()
    printed = run_nereus("completion", shell)
    assert printed.code == 0, printed.stderr
    assert printed.stdout == committed, "run `make reference`"
    document = run_nereus("--json", "completion", shell)
    assert document.code == 0 and json.loads(document.stdout) == {
        "shell": shell, "script": committed}


def test_completion_for_an_unknown_shell_is_a_usage_error() -> None:
    """An unsupported shell exits 2 naming the shells there are, and prints no script."""
    result = run_nereus("completion", "tcsh")
    assert result.code == 2, result.stderr
    assert "tcsh" in result.stderr and "bash" in result.stderr and "fish" in result.stderr
    assert result.stdout == ""


def _named_home(tmp_path: Path) -> Path:
    """A home with route default (2 partitions) and lanes local and audit."""
    home = tmp_path / "named"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text() + '\n[lanes.audit]\ndestination = "file"\n'
                      'path = "outbox/audit.jsonl"\n')
    return home


def test_bash_offers_the_homes_lanes_routes_and_shards(tmp_path: Path) -> None:
    """Names come from the home's nereus.toml (the line's --home, else NEREUS_HOME), read
    by the script itself: lanes after --lane and for `lane close`, shards for SHARD
    arguments, routes after --route."""
    home = str(_named_home(tmp_path))
    assert set(_bash_complete("nereus", "--home", home, "message", "schedule", "--lane",
                              "")) == {"local", "audit"}
    assert set(_bash_complete("nereus", "--home", home, "lane", "close", "")) == {
        "local", "audit"}
    assert set(_bash_complete("nereus", "--home", home, "shard", "inspect", "")) == {
        "default/0", "default/1"}
    assert _bash_complete("nereus", "--home", home, "message", "cancel", "x", "--route",
                          "") == ["default"]
    assert _bash_complete("nereus", "--home", str(tmp_path / "none"), "lane", "close",
                          "") == []


@needs_zsh
def test_zsh_offers_the_homes_lanes(tmp_path: Path) -> None:
    """zsh offers the lanes of $NEREUS_HOME's nereus.toml for `lane close`."""
    home = _named_home(tmp_path)
    functions = tmp_path / "functions"
    functions.mkdir()
    shutil.copy(ZSH, functions / "_nereus")
    done = subprocess.run(["zsh", "-f", "-c", ZSH_CAPTURE, "capture", str(functions),
                           "nereus lane close "], capture_output=True, text=True, check=False,
                          timeout=60, cwd=tmp_path,
                          env={"HOME": str(tmp_path), "TERM": "dumb", "NEREUS_HOME": str(home),
                               "PATH": "/usr/bin:/bin"})
    assert set(re.findall(r"HIT<([^>]*)>", done.stdout)) == {"local", "audit"}


@needs_fish
def test_fish_offers_the_homes_shards(tmp_path: Path) -> None:
    """fish offers the shards of the line's --home for `shard inspect`."""
    home = _named_home(tmp_path)
    line = f"nereus --home {home} shard inspect "
    done = subprocess.run(["fish", "--no-config", "-c",
                           f"source {shlex.quote(str(FISH))}; complete -C {shlex.quote(line)}"],
                          capture_output=True, text=True, check=True, timeout=30)
    assert {row.split("\t")[0] for row in done.stdout.splitlines() if row} == {
        "default/0", "default/1"}
