"""Helpers for CLI tests against homes with and without a running engine."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import CliResult, run_nereus

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
SHARDS = ["default/0", "default/1"]


def init_home(path: Path) -> Path:
    result = run_nereus("init", "--partitions", "2", home=path)
    assert result.code == 0, result.stderr
    return path


def utc(text: str) -> datetime:
    assert ISO_UTC.match(text), f"not ISO-8601 UTC with Z: {text!r}"
    value = datetime.fromisoformat(text)
    assert value.utcoffset() == timedelta(0)
    return value


def one_json(result: CliResult) -> Any:
    """stdout holds exactly one JSON document (json.loads refuses trailing data)."""
    return json.loads(result.stdout)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def log_ends(home: Path) -> dict[str, int | None]:
    result = run_nereus("--json", "shard", "list", home=home)
    assert result.code == 0, result.stderr
    return {s["shard"]: s["log_end_position"] for s in result.json()}


def nothing_queued(home: Path) -> bool:
    """No shard of this home has a record in its log (``offline_home`` never gets one)."""
    return all(not end for end in log_ends(home).values())


def write_batch(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines))
    return path
