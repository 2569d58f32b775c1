"""Loading playbooks from TOML: the shipped ones load, and every mistake is reported with
the file, the line, the step and the field before anything runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nereus.cli.playbook.catalog import SHIPPED_DIR, discover, locate, read
from nereus.cli.playbook.language.load import PlaybookError, load_playbook, prose
from nereus.cli.playbook.language.model import Playbook

MINIMAL = '''
description = "A test playbook."

[vars.lane]
description = "the lane"

[[steps]]
id = "first"
title = "List lanes"
run = ["lane", "list"]
post = ["find(output, 'lane', lane) != null"]

[[steps]]
id = "second"
title = "Close it"
run = "lane close {lane} --reason 'two words' --yes"
'''

SHIPPED = ["checkpoint-cycle", "drain-and-close-lane", "pre-upgrade-check",
           "recover-on-new-home", "reopen-lane", "replace-node", "resolve-uncertain",
           "rolling-restart", "settle-lane-uncertain"]


def load(text: str) -> Playbook:
    return load_playbook(text, origin="t.toml", name="t")


def test_every_shipped_playbook_loads_with_guidance(tmp_path: Path) -> None:
    """The eight shipped runbooks load, describe themselves, and every step says what to do
    when it fails (its own on_failure or the playbook's)."""
    found = discover(tmp_path)
    assert sorted(found) == SHIPPED
    for name in SHIPPED:
        playbook = read(found[name])
        assert playbook.name == name and playbook.description and playbook.title
        for step in playbook.steps:
            assert step.title, (name, step.id)
            assert step.on_failure is not None or playbook.on_failure is not None, (name, step.id)
            assert step.post or step.wait is not None, f"{name}.{step.id} checks nothing"


def test_a_minimal_playbook() -> None:
    """run may be a list or one shell-like string; quotes group words."""
    playbook = load(MINIMAL)
    assert [s.id for s in playbook.steps] == ["first", "second"]
    second = playbook.steps[1]
    assert [w.source for w in second.run] == ["lane", "close", "{lane}", "--reason", "two words",
                                              "--yes"]
    lane = playbook.variable("lane")
    assert lane is not None and lane.required


def test_toml_syntax_errors_carry_the_line() -> None:
    """tomllib's line and column reach the operator, with the file name."""
    with pytest.raises(PlaybookError, match=r"t\.toml: not valid TOML: .*line 3"):
        load('description = "x"\n\n[[steps]\nid = "a"\n')


@pytest.mark.parametrize(("change", "where"), [
    (('post = ["find', 'post = ["fnd'), r"t\.toml:11: step 'first': post: .*unknown function"),
    (('title = "Close it"\n', 'title = "Close it"\ncolour = "red"\n'),
     r"t\.toml:16: step 'second': unknown key 'colour'"),
    (('id = "second"', 'id = "Second"'), r"t\.toml:14: step 2: id: expected a-z"),
    (('id = "second"', 'id = "first"'), r"t\.toml:14: step 'first': id: another step"),
    (("{lane} --reason", "{lan} --reason"), r"t\.toml:\d+: step 'second': run: unknown name "
     r"'lan'"),
    (("{lane} --reason", "{steps.second.x} --reason"),
     r"step 'second': run: steps\.second is not an earlier step"),
    (('description = "the lane"', 'description = "the lane"\ntype = "float"'),
     r"t\.toml:6: variable 'lane': type = 'float'"),
    (('[vars.lane]', '[vars.output]'), r"t\.toml:4: variable 'output': names are"),
    (('run = ["lane", "list"]', 'run = ["nereus", "lane", "list"]'),
     r"t\.toml:10: step 'first': run: leave out `nereus`"),
    (('run = ["lane", "list"]', 'run = ["lane", "list"]\nexit_codes = [0, "1"]'),
     r"step 'first': exit_codes"),
    (('run = ["lane", "list"]', 'run = ["lane", "list"]\nwait = { until = "true" }'),
     r"step 'first': wait: needs until .* and timeout"),
    (('run = ["lane", "list"]', 'run = ["lane", "list"]\nhome = "{steps.x.y}"'),
     r"step 'first': home: may use variables only"),
    (("post = [\"find(output, 'lane', lane) != null\"]", 'pre = ["output.ok"]'),
     r"step 'first': pre: unknown name 'output' \(output and exit_code exist only in post"),
    (('description = "A test playbook."', 'descripton = "typo"'), r"t\.toml:2: unknown key "
     r"'descripton'"),
])
def test_mistakes_name_file_line_step_and_field(change: tuple[str, str], where: str) -> None:
    """Each kind of mistake is refused with where it is and what is wrong."""
    old, new = change
    assert old in MINIMAL
    with pytest.raises(PlaybookError, match=where):
        load(MINIMAL.replace(old, new, 1))


def test_the_name_inside_must_match_the_file() -> None:
    """A playbook cannot claim another name than its file's (it would shadow the wrong one)."""
    with pytest.raises(PlaybookError, match="name = 'other' but the file is named 't'"):
        load('name = "other"\n' + MINIMAL)


def test_a_default_must_fit_its_type() -> None:
    """Defaults are checked when loading, not when a run needs them."""
    text = MINIMAL.replace('description = "the lane"',
                           'description = "the lane"\ntype = "int"\ndefault = "many"')
    with pytest.raises(PlaybookError, match=r"t\.toml:\d+: variable 'lane': default: .*not an "
                       "integer"):
        load(text)


def test_prose_reflows_paragraphs() -> None:
    """Multi-line TOML strings print as paragraphs, not as the file's line breaks."""
    assert prose("\n  one\n  two\n\n  three\n") == "one two\nthree"


def test_home_playbooks_shadow_shipped_ones(tmp_path: Path) -> None:
    """A <home>/playbooks/NAME.toml replaces the shipped NAME; new names are added."""
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "reopen-lane.toml").write_text(MINIMAL)
    (tmp_path / "playbooks" / "mine.toml").write_text(MINIMAL)
    found = discover(tmp_path)
    assert found["reopen-lane"].origin == "home" and found["reopen-lane"].shadows
    assert found["mine"].origin == "home" and not found["mine"].shadows
    assert found["checkpoint-cycle"].path.parent == SHIPPED_DIR
    assert locate(tmp_path, "mine").path == tmp_path / "playbooks" / "mine.toml"
    with pytest.raises(Exception, match=re.escape("no playbook named 'nope'")):
        locate(tmp_path, "nope")
