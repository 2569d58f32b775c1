"""A shard loop is seen from outside through its status and public methods only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from nereus.engine.shard.loop_status import ENDED_STATES, SETTLED_STATES, ShardState

ROOT = Path(__file__).resolve().parents[2]


def test_shard_states_print_the_same_strings_as_before() -> None:
    """The enum's values are the strings `engine status --json` always printed, and JSON
    encodes a member as that string."""
    assert [state.value for state in ShardState] == [
        "STARTING", "RECOVERING", "ACTIVE", "DEGRADED", "STOPPING", "STOPPED", "FAILED",
        "FENCED"]
    assert json.dumps({"state": ShardState.FENCED}) == '{"state": "FENCED"}'
    assert f"the shard is {ShardState.STOPPING}" == "the shard is STOPPING"
    assert ShardState.ACTIVE == "ACTIVE" and "FAILED" in ENDED_STATES
    assert set(SETTLED_STATES) == {ShardState.ACTIVE, ShardState.FAILED, ShardState.FENCED}


def _private_loop_reads(path: Path) -> list[str]:
    """``<...>loop._name`` attribute reads in one module, as ``file:line name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else \
            owner.attr if isinstance(owner, ast.Attribute) else ""
        if name == "loop" or name.endswith("_loop"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.attr}")
    return found


def test_nothing_outside_the_shard_loop_reads_its_private_attributes() -> None:
    """The admin API, the engine, the TUI, the CLI and the tests use ``status()``,
    ``wake()`` and the loop's other public methods, never ``loop._claims`` or ``_wake``."""
    modules = [path for folder in ("engine", "adapters", "cli", "tui", "tests")
               for path in sorted((ROOT / folder).rglob("*.py"))
               if path != ROOT / "engine" / "shard_loop.py"]
    assert len(modules) > 50
    offenders = [hit for path in modules for hit in _private_loop_reads(path)]
    assert offenders == []
