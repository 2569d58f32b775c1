"""Scenarios of ``tests/cli/test_typed_documents.py`` for ``upgrade check|status|finalize``
(each runs the command as an operator would and returns the documents it printed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import run_nereus

Document = dict[str, Any]
TESTING = {"NEREUS_FEATURE_LEVEL_TESTING": "1"}


def _json(*args: str, home: Path, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = run_nereus("--json", *args, home=home, env=env)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return result.json()


def _check(home: Path) -> list[Document]:
    """A fresh home (no databases yet), then one at a level above this build's (refused)."""
    fresh = _json("upgrade", "check", home=home)
    _json("upgrade", "finalize", "--reason", "typed", "--yes", home=home, env=TESTING)
    refused = _json("upgrade", "check", home=home, code=1)
    return [fresh, refused]


def _status(home: Path) -> list[Document]:
    return [_json("upgrade", "status", home=home)]


def _finalize(home: Path) -> list[Document]:
    """UNCHANGED at the level in force, DRY_RUN and RAISED at the test-only one."""
    same = _json("upgrade", "finalize", "--to", "1", "--reason", "typed", "--yes", home=home)
    dry = _json("upgrade", "finalize", "--reason", "typed", "--dry-run", home=home, env=TESTING)
    raised = _json("upgrade", "finalize", "--reason", "typed", "--yes", home=home, env=TESTING)
    return [same, dry, raised]


UPGRADE_SCENARIOS: dict[str, Callable[[Path], list[Document]]] = {
    "upgrade check": _check,
    "upgrade status": _status,
    "upgrade finalize": _finalize,
}
