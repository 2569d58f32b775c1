"""A worker process that was stopped (SIGSTOP) and continued: its shard moves to the other
worker, which waits for the stopped one to let go of the shard's database (``in use by
pid``) and takes it within seconds of the SIGCONT, not after a failed shard's 30-s retry.
Found by the chaos runs (``worker-stop``: the shard stayed FAILED about 30 s)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.engine_process import children_of
from tests.conftest import run_nereus
from tests.daemon import engine_pid, process_stopped
from tests.polling import wait_until


def _owner(home: Path, shard: str) -> str | None:
    """The node (worker) that owns ``shard`` ACTIVE, from ``cluster status``."""
    status = run_nereus("--json", "cluster", "status", home=home)
    if status.code != 0:
        return None
    document: dict[str, Any] = status.json()
    for node in document["nodes"]:
        if shard in node["shards"] and node["alive"]:
            return str(node["node_id"])
    return None


def _active_on_other(home: Path, shard: str, stopped: str) -> str | None:
    owner = _owner(home, shard)
    shards = run_nereus("--json", "engine", "status", home=home)
    if owner is None or owner == stopped or shards.code != 0:
        return None
    states = {s["shard"]: s["state"] for s in shards.json()["shards"]}
    return owner if states.get(shard) == "ACTIVE" else None


def _worker_pid(home: Path, index: int) -> int:
    front = engine_pid(home)
    assert front is not None
    for pid in children_of(front):
        argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        if b"--worker" in argv and argv[argv.index(b"--worker") + 1] == str(index).encode():
            return pid
    raise AssertionError(f"no worker {index} among the children of {front}")


@pytest.mark.timeout(180)
def test_a_stopped_workers_shard_is_taken_soon_after_it_continues(tmp_path: Path) -> None:
    """Two workers, two shards: SIGSTOP the worker owning default/0 until the other worker
    holds the shard (and finds its database in use by the stopped pid), then SIGCONT: the
    shard is ACTIVE on the other worker within 15 s."""
    home = tmp_path / "home"
    assert run_nereus("init", "--partitions", "2", home=home).code == 0
    started = run_nereus("--json", "engine", "start", "--workers", "2", "--timeout", "60",
                         home=home, timeout=90)
    assert started.code == 0, started.stdout + started.stderr
    try:
        owner = wait_until("an owner", lambda: _owner(home, "default/0"), 30)
        pid = _worker_pid(home, int(owner.rsplit("-", 1)[1]))
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until("the worker stopped", lambda: process_stopped(pid), 10)
            wait_until("default/0 placed on the other worker",
                       lambda: _owner(home, "default/0") not in (None, owner), 60)
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_until("default/0 ACTIVE on the other worker within 15 s of the SIGCONT",
                   lambda: _active_on_other(home, "default/0", owner), 15)
    finally:
        stop = run_nereus("engine", "stop", "--timeout", "60", home=home, timeout=90)
        assert stop.code == 0, stop.stdout + stop.stderr
