"""``nereus shard inspect`` disk accounting, through the installed ``nereus`` (fresh home,
--json): live, obsolete and terminal-retained bytes, and the oldest retained item."""

from __future__ import annotations

import json
from pathlib import Path

from nereus.state import keys
from nereus.state.store import ShardStore
from tests.conftest import run_nereus

SHARD = "default/0"


def _home_with_messages(tmp_path: Path) -> Path:
    """A home whose shard database holds 40 messages, 10 of them cancelled (terminal)."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "1", home=home).code == 0
    lines = [json.dumps({"id": f"m{n}", "lane": "local", "delay": "1h", "payload": "x" * 200})
             for n in range(40)]
    (tmp_path / "batch.jsonl").write_text("\n".join(lines))
    result = run_nereus("message", "schedule", "--batch", str(tmp_path / "batch.jsonl"),
                        home=home)
    assert result.code == 0, result.stderr
    for n in range(10):
        assert run_nereus("message", "cancel", f"m{n}", home=home).code == 0
    result = run_nereus("shard", "replay", SHARD, "--empty", "--into",
                        str(home / "state" / SHARD), home=home)
    assert result.code == 0, result.stderr
    return home


def _disk(home: Path, *db: str) -> dict[str, object]:
    result = run_nereus("--json", "shard", "inspect", SHARD, *db, home=home)
    assert result.code == 0, result.stderr
    disk = json.loads(result.stdout)["disk"]
    assert isinstance(disk, dict)
    return disk


def test_inspect_reports_live_obsolete_and_terminal_retained_bytes(tmp_path: Path) -> None:
    """The disk object has every figure, and with nothing in the retention family the
    oldest retained item is null; the terminal count is the cancelled messages."""
    home = _home_with_messages(tmp_path)
    disk = _disk(home)
    assert set(disk) == {"live_bytes", "sst_bytes", "wal_bytes", "obsolete_bytes",
                         "terminal_messages", "terminal_retained_bytes", "oldest_retained"}
    for name in ("live_bytes", "sst_bytes", "wal_bytes", "obsolete_bytes",
                 "terminal_retained_bytes"):
        value = disk[name]
        assert isinstance(value, int) and value >= 0, (name, disk)
    assert disk["terminal_messages"] == 10
    assert disk["oldest_retained"] is None
    human = run_nereus("shard", "inspect", SHARD, home=home)
    assert "terminal retained" in human.stdout and "estimate" in human.stdout
    assert "oldest retained: none" in human.stdout


def test_inspect_names_the_first_item_of_the_retention_family(tmp_path: Path) -> None:
    """The oldest retained item is the retention key that expires first: its kind, id and
    expiry, read with one seek."""
    home = _home_with_messages(tmp_path)
    with ShardStore.open(home / "state" / SHARD) as store:
        store.write({
            keys.retain_key(1_800_000_000_000, keys.RETAIN_MESSAGE, "m3"): b"",
            keys.retain_key(1_700_000_000_000, keys.RETAIN_RESULT, "c/abc"): b"",
        })
    oldest = _disk(home, "--db", str(home / "state" / SHARD))["oldest_retained"]
    assert oldest == {"kind": "result", "id": "c/abc", "expire_at_ms": 1_700_000_000_000,
                      "expire_at": "2023-11-14T22:13:20.000Z"}
    human = run_nereus("shard", "inspect", SHARD, home=home)
    assert "oldest retained: result c/abc until 2023-11-14T22:13:20.000Z" in human.stdout
