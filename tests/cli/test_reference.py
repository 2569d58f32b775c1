"""Man pages generated from the CLI: committed copies current, pages that render, keys
documented for every command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from nereus.cli.json_keys import JSON_KEYS
from nereus.cli.reference import COMPLETION_FILES, generate, tree
from nereus.cli.reference.man import man_pages
from nereus.cli.reference.model import build

ROOT = Path(__file__).resolve().parents[2]
MAN_PAGES = sorted((ROOT / "man").glob("nereus*.1"))
REGENERATE = "run `make reference` and commit man/ and completions/"

needs_man = pytest.mark.skipif(shutil.which("man") is None or shutil.which("groff") is None,
                               reason="man and groff are not installed")


def _render(page: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80",
           "LANG": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    return subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, env=env,
                          check=False, timeout=60)


def _plain(text: str) -> str:
    """Rendered man text without overstrike (bold/underline) sequences."""
    return re.sub(r".\x08", "", text)


def test_committed_files_equal_a_fresh_generation(tmp_path: Path) -> None:
    """Regenerating into an empty directory (another process, another hash seed) gives
    byte-identical man pages, completion scripts and root help, and no page the CLI
    lost."""
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-m", "nereus.cli.reference", "--write", "--out",
                    str(tmp_path)], check=True, capture_output=True, env=env, timeout=120)
    fresh = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                   if p.is_file())
    committed = sorted([*(p.relative_to(ROOT).as_posix() for p in MAN_PAGES),
                        *(path for path in COMPLETION_FILES.values() if (ROOT / path).exists()),
                        *(p.relative_to(ROOT).as_posix()
                          for p in (ROOT / "cli" / "help").glob("nereus.*"))])
    assert fresh == committed, f"generated files differ from the committed set: {REGENERATE}"
    stale = [path for path in fresh
             if (tmp_path / path).read_bytes() != (ROOT / path).read_bytes()]
    assert not stale, f"out of date: {', '.join(stale)}: {REGENERATE}"


def test_check_mode_reports_an_edited_page(tmp_path: Path) -> None:
    """``--check`` exits 1 naming a page that no longer matches, and a stale extra page."""
    from nereus.cli.reference import differences, write

    files = generate()
    write(tmp_path, files)
    assert differences(tmp_path, files) == []
    (tmp_path / "man" / "nereus-engine.1").write_text("edited by hand\n")
    (tmp_path / "man" / "nereus-gone.1").write_text(".TH GONE 1\n")
    check = subprocess.run([sys.executable, "-m", "nereus.cli.reference", "--check", "--out",
                            str(tmp_path)], capture_output=True, text=True, timeout=120,
                           check=False)
    assert check.returncode == 1
    assert "changed man/nereus-engine.1" in check.stderr
    assert "stale man/nereus-gone.1" in check.stderr
    assert "make reference" in check.stderr


def test_there_is_a_page_for_every_top_level_command() -> None:
    """nereus.1 plus one page per top-level group or command, nothing else."""
    expected = {"nereus.1", *(f"nereus-{c.name}.1" for c in tree().subcommands)}
    assert {p.name for p in MAN_PAGES} == expected, REGENERATE


@needs_man
@pytest.mark.parametrize("page", MAN_PAGES, ids=lambda p: p.name)
def test_man_renders_the_page(page: Path) -> None:
    """``man -l`` formats the page without a warning, with the sections a reader expects."""
    rendered = _render(page)
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stderr == "", rendered.stderr
    text = _plain(rendered.stdout)
    sections = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"]
    if page.name == "nereus.1":
        sections += ["GLOBAL OPTIONS", "COMMANDS", "ENVIRONMENT", "FILES", "JSON OUTPUT"]
    for section in sections:
        assert re.search(rf"^{section}$", text, re.MULTILINE), f"{page.name}: no {section}"
    lint = subprocess.run(["groff", "-man", "-ww", "-z", str(page)], capture_output=True,
                          text=True, check=False, timeout=60)
    assert lint.returncode == 0 and lint.stderr == "", lint.stderr


@needs_man
def test_pages_document_every_command_option_and_exit_status() -> None:
    """Each command's page names the command, each of its options and its JSON keys; the
    overview names every exit status and the environment the CLI reads."""
    root = tree()
    for top in root.subcommands:
        text = _plain(_render(ROOT / "man" / f"nereus-{top.name}.1").stdout)
        flat = " ".join(text.split())
        for command in top.leaves():
            assert command.full_name in flat, command.full_name
            for option in command.options:
                for name in option.opts:
                    assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", flat), (
                        f"{command.full_name}: {name} missing from nereus-{top.name}(1)")
            described = JSON_KEYS.get(command.key)  # missing: see the test below
            for key in described.keys if described else ():
                assert key in flat, f"{command.full_name}: JSON key {key} not documented"
    overview = " ".join(_plain(_render(ROOT / "man" / "nereus.1").stdout).split())
    for words in ("0 Success", "2 Usage error", "3 The target does not exist",
                  "4 The engine is unreachable", "5 An external service is unreachable",
                  "NEREUS_HOME", "NEREUS_OUTPUT", "NO_COLOR", "<home>/run/admin.sock",
                  "<home>/nereus.toml", "<home>/run/engine.pid"):
        assert words in overview, words


def test_every_command_has_a_json_key_entry() -> None:
    """Commands the JSON-key table does not describe yet (fill them in cli/json_keys.py)."""
    missing = [c.key for c in tree().leaves() if c.key not in JSON_KEYS]
    assert not missing, (f"no entry in nereus.cli.json_keys.JSON_KEYS for: {', '.join(missing)}; "
                         "read each command's output and add its keys, then " + REGENERATE)


def test_a_command_without_an_entry_is_still_documented() -> None:
    """A command missing from the table gets a pointer to its --json output, not a crash."""
    app = typer.Typer()

    @app.command("brand-new")
    def brand_new(count: int = typer.Option(3, "--count", help="How many.")) -> None:
        """A command nobody described yet."""

    @app.command("other")
    def other() -> None:
        """Another one."""

    pages = man_pages(build(typer.main.get_command(app)), {})
    page = pages["nereus-brand-new.1"]
    assert "see the command's \\-\\-json output" in page
    assert "\\fB\\-\\-count\\fR \\fIINTEGER\\fR" in page and "Default: 3." in page
