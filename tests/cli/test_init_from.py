"""``nereus init --from HOME``: a new home with another home's configuration, reaching the
same object store (what recover-on-new-home starts from)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from nereus.cli.commands.init_from import pin_object_store
from tests.conftest import run_nereus
from tests.daemon import running_engine


def test_init_from_copies_config_object_store_and_file_log(tmp_path: Path) -> None:
    """The copy points at the old home's object store by absolute path; file-log segments
    are copied only when asked, and never while the old engine writes them."""
    old, new = tmp_path / "old", tmp_path / "new"
    assert run_nereus("init", "--partitions", "2", home=old).code == 0
    assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--payload",
                      "x", home=old).code == 0
    without = run_nereus("init", "--from", str(old), home=new)
    assert without.code == 2 and "pass --copy-log" in without.stderr
    assert not (new / "nereus.toml").exists()
    with running_engine(old):
        busy = run_nereus("init", "--from", str(old), "--copy-log", home=new)
        assert busy.code == 1 and "is running" in busy.stderr
    made = run_nereus("--json", "init", "--from", str(old), "--copy-log", home=new)
    assert made.code == 0, made.stderr
    data = made.json()
    assert data["shards"] == ["default/0", "default/1"]
    assert data["object_store"] == str(old.absolute() / "objects")
    config = tomllib.loads((new / "nereus.toml").read_text())
    assert config["objects"]["path"] == str(old.absolute() / "objects")
    assert config["routes"] == tomllib.loads((old / "nereus.toml").read_text())["routes"]
    old_ends = {s["shard"]: s["log_end_position"] for s in
                run_nereus("--json", "shard", "list", home=old).json()}
    new_ends = {s["shard"]: s["log_end_position"] for s in
                run_nereus("--json", "shard", "list", home=new).json()}
    assert new_ends == old_ends and sum(e or 0 for e in new_ends.values()) >= 1
    # the route's evidence key (made by the old engine) came along, private
    old_key, new_key = (home / "secrets" / "default.evidence-key" for home in (old, new))
    assert new_key.read_text() == old_key.read_text()
    assert new_key.stat().st_mode & 0o777 == 0o600
    again = run_nereus("init", "--from", str(old), "--copy-log", home=new)
    assert again.code == 1 and "already exists" in again.stderr
    itself = run_nereus("init", "--from", str(old), "--force", home=old)
    assert itself.code == 2 and "names this home itself" in itself.stderr


def test_pin_object_store_replaces_adds_or_appends_the_path(tmp_path: Path) -> None:
    """Whatever [objects] looked like, the result has one absolute path in it."""
    target = tmp_path / "objects"
    cases = ['[routes.a]\nlog = "file"\n',
             '[objects]\nstore = "file"\n\n[shard]\nx = 1\n',
             '[objects]  # here\npath = "objects"\nstore = "file"\n']
    for text in cases:
        pinned = tomllib.loads(pin_object_store(text, target))
        assert pinned["objects"]["path"] == str(target), text
