"""Status that is whole (issue 38, item 3): ``lane list``'s published count survives a
restart (it is the shards' replicated counts, not a counter of the process), and after the
disk filled up under a two-worker engine, ``status`` still counts the messages stored on
the shards no worker holds (read from their databases) instead of "messages: none"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.daemon import stop_engine
from tests.integration.test_failures_say_why import _disk_named, _small_disk
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(240)


def _json(home: Path, *args: str, code: int = 0) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=150)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _lane(home: Path, name: str) -> dict[str, Any]:
    lanes: list[dict[str, Any]] = _json(home, "lane", "list")
    return next(lane for lane in lanes if lane["lane"] == name)


def test_lane_list_published_is_kept_across_a_restart(tmp_path: Path) -> None:
    """Three messages published on lane ``local``; after ``engine stop`` and ``start``,
    ``lane list`` still says published 3 (before: 0 after every restart), and
    ``published_since_start`` counts this run's publish calls (0)."""
    home = tmp_path / "home"
    _json(home, "init")
    _json(home, "engine", "start")
    try:
        for n in range(3):
            _json(home, "message", "schedule", "--lane", "local", "--delay", "0s",
                  "--id", f"m{n}", "--payload", "x", "--wait")
        wait_until("three messages published",
                   lambda: _lane(home, "local")["published"] == 3 or None, 60)
        assert _lane(home, "local")["published_since_start"] == 3
        _json(home, "engine", "stop")
        _json(home, "engine", "start")
        again = _lane(home, "local")
        assert (again["published"], again["published_since_start"]) == (3, 0), again
        human = run_nereus("lane", "list", home=home)
        assert "since start" in human.stdout, human.stdout
    finally:
        stop_engine(home)


def test_status_counts_the_messages_of_shards_no_worker_holds_after_a_full_disk(
        tmp_path: Path) -> None:
    """A two-worker engine on a 64 MiB disk with 20 messages stored: the disk is filled,
    the shards lose their owners, and ``status`` still counts the 20 SCHEDULED messages,
    naming the shards it read from their databases (before: "messages: none")."""
    with _small_disk(tmp_path / "disk", "64m") as disk:
        home = disk / "home"
        _json(home, "init", "--partitions", "2")
        _json(home, "engine", "start", "--workers", "2")
        filler = disk / "filler"
        try:
            for n in range(20):
                _json(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                      "--id", f"m{n}", "--payload", "x", "--wait")
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"],
                           capture_output=True, check=False)
            wait_until("the full disk in status", lambda: _disk_named(home), 90)
            status = _json(home, "status")
            assert status["engine_running"] is True
            assert status["counted_from_disk"], status
            assert status["messages_by_state"].get("SCHEDULED") == 20, status
            human = run_nereus("status", home=home)
            assert "20 SCHEDULED" in human.stdout, human.stdout
        finally:
            filler.unlink(missing_ok=True)
            stop_engine(home)
