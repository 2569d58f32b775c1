"""Engine files deleted under a running engine (issue 38, item 8): with its pid file and
admin socket gone, every command that needs the engine names the engine that runs (its
pid, from the home's lock) and how to get a socket again, instead of "not running"; the
commands that can answer from the files do so and say why; ``engine stop`` finds the
engine by the lock and ``engine start`` then makes a new socket."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.daemon import stop_engine

pytestmark = pytest.mark.timeout(180)


def _run(home: Path, *args: str, code: int) -> tuple[Any, str]:
    result = run_nereus("--json", *args, home=home)
    assert result.code == code, (args, result.code, result.stdout, result.stderr)
    return json.loads(result.stdout), result.stderr


def _names_the_engine(document: dict[str, Any], pid: int) -> None:
    assert f"the engine (pid {pid}) runs on" in document["error"], document
    assert "admin socket" in document["error"] and "is gone" in document["error"], document
    assert "nereus engine stop" in document["hint"], document


def test_every_command_names_the_engine_whose_socket_and_pid_file_were_deleted(
        tmp_path: Path) -> None:
    """Socket and pid file deleted: ``engine status``, ``lane list`` and ``message
    schedule --wait`` exit 4 naming the engine's pid and ``nereus engine stop`` (before:
    "not running", "start it with `nereus engine start`"); ``status`` says the engine runs
    unreachable (before: "engine not running"); ``shard list`` answers from the files
    with a warning naming the engine; ``engine start`` refuses naming the deleted files;
    ``engine stop`` stops it by its pid and a new start answers again."""
    home = tmp_path / "home"
    _run(home, "init", code=0)
    started, _ = _run(home, "engine", "start", code=0)
    pid = started["pid"]
    try:
        (home / "run" / "engine.pid").unlink()
        (home / "run" / "admin.sock").unlink()

        status, stderr = _run(home, "engine", "status", code=4)
        assert status["running"] is True and stderr == "", (status, stderr)
        _names_the_engine(status, pid)
        lanes, stderr = _run(home, "lane", "list", code=4)
        _names_the_engine(lanes, pid)
        assert stderr == ""
        waited, stderr = _run(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                              "--payload", "x", "--wait", code=4)
        _names_the_engine(waited, pid)
        assert stderr == "", stderr

        summary, _ = _run(home, "status", code=0)
        assert summary["engine_running"] is True and summary["unreachable_pid"] == pid
        assert not summary["healthy"]
        assert any(f"pid {pid}" in p and "engine stop" in p for p in summary["problems"])
        human = run_nereus("status", home=home)
        assert f"engine running (pid {pid}) but unreachable" in human.stdout, human.stdout

        shards, stderr = _run(home, "shard", "list", code=0)
        assert shards and f"the engine (pid {pid}) runs on" in stderr, stderr

        refused, _ = _run(home, "engine", "start", code=1)
        assert f"pid {pid}" in refused["error"], refused
        assert "admin socket is gone" in refused["error"] and "pid file is gone" in \
            refused["error"], refused

        stopped, _ = _run(home, "engine", "stop", code=0)
        assert (stopped["stopped"], stopped["pid"]) == (True, pid), stopped
        _run(home, "engine", "start", code=0)
        answered, _ = _run(home, "engine", "status", code=0)
        assert answered["running"] is True
    finally:
        stop_engine(home)


def test_an_engine_that_closed_its_socket_to_stop_is_said_to_be_stopping(
        tmp_path: Path) -> None:
    """An engine that holds the home and closed its admin socket because it is stopping
    (its marker names its pid) is said to be stopping, with "wait until it has exited", by
    ``engine status`` (exit 4) and by ``shard list``'s warning; before, the same words as a
    socket deleted under it ("is gone ... deleted under it"). A graceful stop leaves no
    marker behind. The stopping engine is played by this test process, which takes the
    home's lock and writes the marker: the window is held open by construction."""
    from nereus.adapters.home.home_lock import acquire_home_lock, mark_stopping

    home = tmp_path / "home"
    _run(home, "init", code=0)
    _run(home, "engine", "start", code=0)
    stop_engine(home)
    assert not (home / "run" / "admin.stopping").exists()  # a graceful stop cleans up
    fd = acquire_home_lock(home)
    try:
        mark_stopping(home / "run")
        status, stderr = _run(home, "engine", "status", code=4)
        assert f"the engine (pid {os.getpid()}) on {home} is stopping" in status["error"]
        assert "deleted under it" not in status["error"] and "has exited" in status["hint"]
        assert stderr == "", stderr
        shards, stderr = _run(home, "shard", "list", code=0)
        assert shards and "is stopping" in stderr and "deleted under it" not in stderr
    finally:
        os.close(fd)
