"""``nereus engine start --workers 2`` fails as one process does: a shard the workers
cannot open is refused at once with the single engine's message and exit status, its
reason logged at error; a start that gives up leaves nothing running; a shard left placed
by a refused start with more partitions is no shard once the count is set back; a worker
process that cannot run again is shown failed, with its own reason."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.daemon import stop_engine
from tests.integration.test_engine_workers import all_active, worker_pids
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(240)


def _json(home: Path, *args: str, code: int = 0) -> Any:
    result = run_nereus("--json", *args, home=home, timeout=150)
    assert result.code == code, f"nereus {' '.join(args)} exited {result.code}: " \
        f"{result.stdout}{result.stderr}"
    return result.json()


def _set_partitions(home: Path, count: int) -> None:
    config = home / "nereus.toml"
    config.write_text(re.sub(r"(?m)^partitions = \d+", f"partitions = {count}",
                             config.read_text()))


def _nothing_runs(home: Path) -> None:
    """No daemon holds the home and no worker process of it is left."""
    status = _json(home, "engine", "status", code=4)
    assert status["running"] is False, status
    wait_until("no worker process left", lambda: not worker_pids(home), 30)


def test_a_partition_count_changed_under_data_is_refused_as_one_engine_refuses_it(
        tmp_path: Path) -> None:
    """With data in two shards and ``partitions = 3``: a two-worker start exits 1 with the
    single engine's error and hint (the database's route, not "did not answer" after the
    timeout), leaves nothing running, and a worker logged the reason at error. Set back to
    2, the start holds exactly the two shards: nothing placed for ``default/2`` by the
    refused start is taken (no phantom shard ACTIVE)."""
    home = tmp_path / "home"
    _json(home, "init", "--partitions", "2")
    _json(home, "engine", "start", "--workers", "2")
    try:
        for index in range(4):
            _json(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                  "--id", f"m{index}", "--payload", "x")
    finally:
        stop_engine(home)
    _set_partitions(home, 3)

    single = _json(home, "engine", "start", "--workers", "1", code=1)
    workers = _json(home, "engine", "start", "--workers", "2", code=1)
    assert "belongs to route default with 2 partitions" in single["hint"], single
    assert (workers["error"], workers["hint"]) == (single["error"], single["hint"])
    _nothing_runs(home)
    logged = _json(home, "engine", "logs", "--level", "error")["lines"]
    failed = [line for line in logged if line.get("event") == "shard_activation_failed"]
    assert failed and "says partitions = 3" in failed[0]["reason"], logged

    _set_partitions(home, 2)
    started = _json(home, "engine", "start", "--workers", "2")
    try:
        assert started["shards"] == ["default/0", "default/1"]
        status = _json(home, "engine", "status")
        assert [(s["shard"], s["state"]) for s in status["shards"]] == [
            ("default/0", "ACTIVE"), ("default/1", "ACTIVE")], status["shards"]
        cluster = _json(home, "cluster", "status")
        assert [s["shard"] for s in cluster["shards"]] == ["default/0", "default/1"]
        listed = _json(home, "message", "list")["messages"]
        assert sorted(m["delay_message_id"] for m in listed) == [f"m{i}" for i in range(4)]
    finally:
        stop_engine(home)


def test_a_start_that_gives_up_leaves_nothing_running(tmp_path: Path) -> None:
    """``engine start --timeout 0.2`` (no engine answers that fast) exits 1 saying the
    engine did not answer and that it was stopped; no daemon and no worker is left to
    come up later behind the operator's back, and the next start works."""
    home = tmp_path / "home"
    _json(home, "init", "--partitions", "2")
    gave_up = _json(home, "engine", "start", "--workers", "2", "--timeout", "0.2", code=1)
    assert gave_up["error"] == "the engine did not answer within 0.2 s; it was stopped"
    _nothing_runs(home)
    _json(home, "engine", "start", "--workers", "2")
    stop_engine(home)


def _restart_failed(home: Path, name: str) -> dict[str, Any] | None:
    """The status (exit 1: not healthy) once the worker ``name`` is not running after a
    restart of its own failed (its second exit: the first was the SIGKILL)."""
    result = run_nereus("--json", "engine", "status", home=home, timeout=90)
    status: dict[str, Any] = result.json()
    worker = next((w for w in status.get("workers", []) if w["name"] == name), None)
    down = worker is not None and worker["state"] != "RUNNING" and worker["restarts"] >= 2
    return status if result.code == 1 and down else None


def test_a_worker_process_that_cannot_run_is_shown_failed_with_its_reason(
        tmp_path: Path) -> None:
    """Worker 1 killed (SIGKILL) while ``nereus.toml`` has a bad table cannot start again:
    ``engine status`` exits 1 and shows ``process-1`` not running with the worker's own
    words (the file and line it refused), not only "exited with status 2", and no "does
    not answer: the engine is not running" for it. Mended, the worker comes back and the
    engine is healthy."""
    home = tmp_path / "home"
    _json(home, "init", "--partitions", "2")
    _json(home, "engine", "start", "--workers", "2")
    config = home / "nereus.toml"
    good = config.read_text()
    try:
        config.write_text(good + "\n[bogus]\n")
        os.kill(worker_pids(home)[1], signal.SIGKILL)
        status = wait_until("process-1 shown not running after a failed restart",
                            lambda: _restart_failed(home, "process-1"), 60)
        worker = next(w for w in status["workers"] if w["name"] == "process-1")
        assert "unknown table [bogus]" in worker["last_error"], worker
        assert any("process-1" in p and "unknown table [bogus]" in p
                   for p in status["problems"]), status["problems"]
        assert not any("worker process 1 does not answer" in p for p in status["problems"])
        config.write_text(good)
        wait_until("the worker back, every shard ACTIVE", lambda: all_active(home), 60)
    finally:
        config.write_text(good)
        stop_engine(home)
