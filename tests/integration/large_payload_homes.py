"""Homes whose inline payload limit is tiny, so a few KB take the large-payload path, and
the CLI calls the large-payload tests make on them (``message schedule --payload-file``,
``shard log``, ``payload gc``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import CliResult, run_nereus

INLINE_LIMIT = 64


def small_inline_home(tmp_path: Path, *, partitions: int = 2) -> Path:
    """A fresh home whose inline limit is tiny, so a few KB take the large-payload path."""
    home = tmp_path / "home"
    result = run_nereus("init", "--partitions", str(partitions), home=home)
    assert result.code == 0, result.stderr
    config = home / "nereus.toml"
    text = config.read_text().replace("max_inline_payload_bytes = 65536",
                                      f"max_inline_payload_bytes = {INLINE_LIMIT}")
    config.write_text(text)
    return home


def payload_file(tmp_path: Path, size: int = 10_000, name: str = "big.bin") -> Path:
    path = tmp_path / name
    path.write_bytes(bytes((i * 7 + i // 251) % 256 for i in range(size)))
    return path


def schedule_file(home: Path, path: Path, *extra: str) -> CliResult:
    return run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                      "--payload-file", str(path), *extra, home=home)


def log_lines(home: Path, shard: str) -> list[dict[str, Any]]:
    """The shard's decoded log after its route identity (the first record of every log)."""
    result = run_nereus("--json", "shard", "log", shard, home=home)
    assert result.code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert not lines or lines[0]["kind"] == "ROUTE_IDENTITY", lines[:1]
    return lines[1:]


def gc(home: Path, *args: str) -> CliResult:
    return run_nereus("--json", "payload", "gc", *args, home=home, input_text="")


def keys_of(items: list[dict[str, Any]]) -> set[str]:
    return {item["key"] for item in items}
