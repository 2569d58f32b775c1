"""The cluster playbooks (``rolling-restart``, ``replace-node``) planned with ``--dry-run``
in a home, as an operator would see them before running: the commands with variables
filled in, the confirmation points, the waits, and nothing written. Every command they
name is one the CLI has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nereus.cli.playbook.catalog import discover, read
from tests.cli.test_playbook_cli import snapshot
from tests.conftest import run_nereus


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A standalone home: a dry run plans without reaching any coordinator."""
    path = tmp_path / "home"
    assert run_nereus("init", home=path).code == 0
    return path


def plan(home: Path, name: str, *variables: str) -> dict[str, Any]:
    args = [arg for variable in variables for arg in ("--var", variable)]
    before = snapshot(home)
    result = run_nereus("--json", "playbook", "run", name, "--dry-run", *args, home=home)
    assert result.code == 0, result.stderr
    assert snapshot(home) == before and not (home / "playbooks").exists()
    data: dict[str, Any] = result.json()
    return data


def test_rolling_restart_drains_restarts_and_undrains_this_node(home: Path) -> None:
    """Drain with --wait, check the node owns nothing (coordinator and engine), stop behind
    a confirmation, start, undrain, and wait for every shard ACTIVE with shards on the node
    again."""
    steps = plan(home, "rolling-restart", "node=n2", "reason=kernel update")["steps"]
    assert [step["id"] for step in steps] == [
        "nodes", "settled_before", "drain", "owns_nothing", "engine_idle", "stop", "start",
        "rejoined", "undrain", "settled_after"]
    by_id = {step["id"]: step for step in steps}
    assert by_id["drain"]["run"] == ["cluster", "drain", "--reason=kernel update", "--yes",
                                     "--wait=300", "--", "n2"]
    assert by_id["stop"]["confirm"].startswith("Node n2 owns no shard now. Stop the engine")
    assert [step["id"] for step in steps if step["confirm"]] == ["stop"]
    assert by_id["undrain"]["run"] == ["cluster", "undrain", "--reason=kernel update",
                                       "--yes", "--", "n2"]
    final = by_id["settled_after"]["wait"]["until"]
    assert '"state", "ACTIVE"' in final and 'where(output.nodes, "node_id", node)' in final


def test_replace_node_drains_the_old_node_and_waits_for_the_new_one(home: Path) -> None:
    """Drain the old node, wait until it owns nothing, ask for the new node and wait for it
    alive, then check every shard ACTIVE and none UNOWNED; nothing is undrained."""
    steps = plan(home, "replace-node", "old_node=n1", "new_node=n4",
                 "reason=disk failing")["steps"]
    assert [step["id"] for step in steps] == [
        "nodes", "drain", "old_owns_nothing", "new_joined", "settled"]
    by_id = {step["id"]: step for step in steps}
    assert by_id["drain"]["run"] == ["cluster", "drain", "--reason=disk failing", "--yes",
                                     "--wait=300", "--", "n1"]
    assert "--node-id n4" in by_id["new_joined"]["confirm"]
    assert 'new_node), "alive"' in by_id["new_joined"]["wait"]["until"]
    assert any('"UNOWNED")) == 0' in check for check in by_id["settled"]["post"])
    assert not any("undrain" in step["run"] for step in steps)


def test_the_same_node_cannot_replace_itself(home: Path) -> None:
    """old_node == new_node fails the first step's precondition before any command runs."""
    result = run_nereus("--json", "playbook", "run", "replace-node", "--yes", "--var",
                        "old_node=n1", "--var", "new_node=n1", "--var", "reason=r", home=home)
    assert result.code == 1, result.stderr
    first = result.json()["steps"][0]
    assert first["id"] == "nodes" and first["exit_code"] is None


@pytest.mark.parametrize("name", ["rolling-restart", "replace-node"])
def test_every_command_the_cluster_playbooks_run_exists(tmp_path: Path, name: str) -> None:
    """Each step's command words (before the first option) name a command of the CLI: a
    renamed command fails here, not in an operator's run."""
    import typer.main

    from nereus.cli.main import app

    group = typer.main.get_command(app)
    for step in read(discover(tmp_path)[name]).steps:
        words = [word.source for word in step.run]
        command: Any = group
        for word in words:
            if word.startswith("-") or "{" in word or not hasattr(command, "commands"):
                break
            assert word in command.commands, f"{name}.{step.id}: no command {words}"
            command = command.commands[word]
        assert not hasattr(command, "commands"), f"{name}.{step.id}: {words} is a group"
