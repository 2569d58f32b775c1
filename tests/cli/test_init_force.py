"""``nereus init --force`` on a home that holds data keeps its routes' shape: a change of
partitions, of log backend, or a configuration without the route is refused (exit 2,
nereus.toml unchanged, the message naming the route, the old and the new value); other
settings may still be rewritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nereus.shard import partition_for
from tests.conftest import run_nereus


@pytest.fixture
def home_with_data(tmp_path: Path) -> Path:
    """Two partitions; one message, which lands on default/1 (default/0 has no log)."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    message_id = next(f"m{n}" for n in range(100) if partition_for(f"m{n}", 2) == 1)
    batch = tmp_path / "one.jsonl"
    batch.write_text(json.dumps({"id": message_id, "lane": "local", "delay": "1h",
                                 "payload": "p"}) + "\n")
    queued = run_nereus("--json", "message", "schedule", "--batch", str(batch), home=home)
    assert queued.code == 0, queued.stderr
    assert not (home / "shardlog" / "default" / "0").exists()
    return home


@pytest.mark.parametrize(("flags", "words"), [
    (("--partitions", "3"), ("partitions", "from 2 to 3", "--partitions 2")),
    (("--partitions", "2", "--log", "pulsar"), ("log", "from file to pulsar", "--log file")),
    (("--route", "orders", "--partitions", "2"), ("no such route", "--route default")),
], ids=["partitions", "log", "route"])
def test_init_force_keeps_the_shape_of_routes_with_data(
        home_with_data: Path, flags: tuple[str, ...], words: tuple[str, ...]) -> None:
    """init --force with other partitions, another log backend or without the route:
    exit 2, nereus.toml byte for byte as it was, the error names the route, both values
    and the option to keep."""
    config = home_with_data / "nereus.toml"
    before = config.read_bytes()
    refused = run_nereus("--json", "init", "--force", *flags, home=home_with_data)
    assert refused.code == 2, refused.stdout
    error = refused.json()
    assert error["exit_code"] == 2 and "route default" in error["error"]
    text = error["error"] + " " + error["hint"]
    for word in words:
        assert word in text
    assert config.read_bytes() == before


def test_init_force_with_the_same_routes_still_rewrites(home_with_data: Path,
                                                        tmp_path: Path) -> None:
    """The same route, partitions and log: init --force succeeds and keeps the route's
    identity (the one its logs carry, here only default/1's), so that log still takes
    commands; before, a fresh id made every later append to default/1 fail."""
    config = home_with_data / "nereus.toml"
    old_id = next(line for line in config.read_text().splitlines() if line.startswith("id ="))
    again = run_nereus("--json", "init", "--force", "--partitions", "2", home=home_with_data)
    assert again.code == 0, again.stderr
    assert old_id in config.read_text().splitlines()
    message_id = next(f"n{n}" for n in range(100) if partition_for(f"n{n}", 2) == 1)
    batch = tmp_path / "next.jsonl"
    batch.write_text(json.dumps({"id": message_id, "lane": "local", "delay": "1h",
                                 "payload": "p"}) + "\n")
    queued = run_nereus("--json", "message", "schedule", "--batch", str(batch),
                        home=home_with_data)
    assert queued.code == 0, queued.stderr
