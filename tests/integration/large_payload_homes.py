"""Homes whose inline payload limit is tiny, so a few KB take the large-payload path, and
the CLI calls the large-payload tests make on them (``message schedule --payload-file``,
``shard log``, ``payload gc``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from nereus.client import RouteRef, prepare_payload_reserve, queue
from tests.conftest import CliResult, run_nereus
from tests.homelog import home_log
from tests.integration.shard_logs import ShardLogs

INLINE_LIMIT = 64


def small_inline_home(tmp_path: Path, *, partitions: int = 2) -> Path:
    """A fresh home whose inline limit is tiny, so a few KB take the large-payload path."""
    home = tmp_path / "home"
    result = run_nereus("init", "--partitions", str(partitions), home=home)
    assert result.code == 0, result.stderr
    shrink_inline_limit(home / "nereus.toml")
    return home


def shrink_inline_limit(config: Path) -> None:
    """``[shard] max_inline_payload_bytes`` from the default to ``INLINE_LIMIT``."""
    text = config.read_text().replace("max_inline_payload_bytes = 65536",
                                      f"max_inline_payload_bytes = {INLINE_LIMIT}")
    config.write_text(text)


def collect_quickly(config: Path) -> None:
    """Retention and dedup window 1 s on lane ``local``, the engine's payload collection
    every second."""
    text = config.read_text()
    anchor = 'destination = "file"\n'
    assert anchor in text
    text = text.replace(anchor, anchor + 'retention = "1s"\ndedup_window = "1s"\n', 1)
    config.write_text(text + '\n[engine]\npayload_gc_interval = "1s"\n')


def payload_objects(home: Path) -> set[str]:
    """The large-payload objects in the home's local object store."""
    root = home / "objects"
    return {str(p.relative_to(root)) for p in (root / "payloads").rglob("*") if p.is_file()} \
        if (root / "payloads").is_dir() else set()


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


def reserve_directly(home: Path, *, delay_message_id: str, expires_at_ms: int,
                     data: bytes, partitions: int = 2) -> str:
    """Queue a PAYLOAD_RESERVE and upload its object, as a client that died before COMMIT;
    the object's key."""
    route = RouteRef("default", partitions)
    shard = route.shard_for(delay_message_id)
    payload_id = hashlib.sha256(delay_message_id.encode()).hexdigest()[:32]
    prepared = prepare_payload_reserve(
        route, command_id=f"reserve-{payload_id}", delay_message_id=delay_message_id,
        payload_id=payload_id, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
        expires_at_ms=expires_at_ms)
    with ShardLogs(lambda s: home_log(home, s)) as logs:
        queue([prepared], logs)
    key = f"payloads/{shard.route}/{shard.partition}/{payload_id}"
    LocalObjectStore(home / "objects").put_bytes(key, data)
    return key
