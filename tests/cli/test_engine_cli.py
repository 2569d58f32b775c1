"""The engine's own life, run as an operator would: the installed ``nereus`` in a
subprocess, a fresh home, ``--json``. Start, status and stop; a stale socket after SIGKILL;
the commands that need the engine when it is not running; quickstart.

The commands that talk to a running engine (``--wait``, ``message show``, publishing, the
lists) are ``test_engine_messages.py``; ``message schedule --batch`` has its own module,
``test_batch_schedule.py``. Every engine started here is stopped by its fixture, whatever
the test did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.engine_homes import SHARDS, nothing_queued, one_json, utc, write_batch
from tests.conftest import run_nereus
from tests.daemon import (
    engine_pid,
    kill_engine,
    process_gone,
    read_outbox,
    running_engine,
    stop_engine,
)
from tests.polling import wait_until

# engine start / status / stop --------------------------------------------------------------

def test_engine_start_status_stop(home: Path) -> None:
    """start runs the daemon in the background; status lists shards and lanes; stop ends it."""
    with running_engine(home) as started:
        assert started["running"] is True
        assert started["shards"] == SHARDS
        assert started["socket"] == str(home.resolve() / "run" / "admin.sock")
        assert engine_pid(home) == started["pid"]

        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 0, status.stderr
        data = one_json(status)
        assert data["running"] is True
        assert data["owner_id"].split(":")[1] == str(started["pid"])
        assert [s["shard"] for s in data["shards"]] == SHARDS
        assert all(s["state"] == "ACTIVE" and s["error"] is None for s in data["shards"])
        assert [lane["lane"] for lane in data["lanes"]] == ["local"]
        assert data["lanes"][0]["gate"] == "OPEN"
        assert data["lanes"][0]["readiness"] == "READY"
        utc(data["started_at"])

        human = run_nereus("engine", "status", home=home)
        assert human.code == 0 and "engine running" in human.stdout

        stopped = run_nereus("--json", "engine", "stop", home=home)
        assert stopped.code == 0, stopped.stderr
        assert one_json(stopped) == {"running": False, "stopped": True, "pid": started["pid"]}
    assert process_gone(started["pid"])
    assert not (home / "run" / "admin.sock").exists()
    assert not (home / "run" / "engine.pid").exists()


def test_engine_status_when_not_running_exits_4(home: Path) -> None:
    """status with no engine exits 4; --json prints one document saying running: false."""
    result = run_nereus("--json", "engine", "status", home=home)
    assert result.code == 4
    data = one_json(result)
    assert data["running"] is False
    assert data["exit_code"] == 4
    assert "not running" in data["error"] and result.stderr == ""

    human = run_nereus("engine", "status", home=home)
    assert human.code == 4
    assert human.stdout == ""
    assert "not running" in human.stderr and "nereus engine start" in human.stderr


def test_engine_stop_when_not_running_exits_0(home: Path) -> None:
    """stop with no engine is not an error: exit 0, and it says nothing was running."""
    result = run_nereus("engine", "stop", home=home)
    assert result.code == 0, result.stderr
    assert "not running" in result.stdout
    as_json = run_nereus("--json", "engine", "stop", home=home)
    assert as_json.code == 0
    assert one_json(as_json) == {"running": False, "stopped": False}


def test_second_engine_start_names_the_running_pid(engine_home: Path) -> None:
    """A second start on the same home fails, names the running pid, and leaves it running."""
    pid = engine_pid(engine_home)
    assert pid is not None
    again = run_nereus("engine", "start", home=engine_home)
    assert again.code != 0
    assert f"pid {pid}" in again.stderr
    as_json = run_nereus("--json", "engine", "start", home=engine_home)
    assert as_json.code != 0
    assert str(pid) in one_json(as_json)["error"]
    status = run_nereus("--json", "engine", "status", home=engine_home)
    assert status.code == 0
    assert status.json()["owner_id"].split(":")[1] == str(pid)


def test_engine_start_without_config_exits_3(tmp_path: Path) -> None:
    """start on a home without nereus.toml exits 3, says to run init, and starts nothing."""
    bare = tmp_path / "bare"
    result = run_nereus("engine", "start", home=bare)
    assert result.code == 3
    assert "no configuration" in result.stderr and "init" in result.stderr
    assert not (bare / "run" / "engine.pid").exists()


def test_killed_engine_leaves_a_stale_socket_that_start_replaces(home: Path) -> None:
    """After SIGKILL the stale socket answers nothing (exit 4); start again works."""
    with running_engine(home):
        pid = kill_engine(home)
        assert pid is not None
        wait_until("the killed engine to exit", lambda: process_gone(pid), 10)
        assert (home / "run" / "admin.sock").exists()
        listed = run_nereus("lane", "list", home=home)  # message show would read offline
        assert listed.code == 4, listed.stderr
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 4 and status.json()["running"] is False
    with running_engine(home) as again:
        assert again["pid"] != pid
        assert run_nereus("engine", "status", home=home).code == 0


# commands that need the daemon --------------------------------------------------------------

NEEDS_ENGINE = {
    "message-explain": ["message", "explain", "m1"],
    "message-show-barrier": ["message", "show", "m1", "--barrier"],
    "message-list": ["message", "list"],
    "lane-list": ["lane", "list"],
    "attempt-list": ["attempt", "list"],
    "schedule-wait": ["message", "schedule", "--lane", "local", "--delay", "1m", "--wait"],
    "cancel-wait": ["message", "cancel", "m1", "--wait"],
    "reschedule-wait": ["message", "reschedule", "m1", "--delay", "1m", "--wait"],
    "batch-wait": ["message", "schedule", "--batch", "BATCH", "--wait"],
}


@pytest.mark.parametrize("args", list(NEEDS_ENGINE.values()), ids=list(NEEDS_ENGINE))
def test_commands_that_need_the_engine_exit_4_without_it(
    offline_home: Path, tmp_path: Path, args: list[str],
) -> None:
    """With no engine: exit 4, one JSON error document with a hint to start it and nothing
    on stderr; nothing queued."""
    batch = write_batch(tmp_path / "b.jsonl", [{"lane": "local", "delay": "1m"}])
    args = [str(batch) if a == "BATCH" else a for a in args]
    result = run_nereus("--json", *args, home=offline_home)
    assert result.code == 4, result.stderr
    data = one_json(result)
    assert data["ok"] is False and data["exit_code"] == 4
    assert "engine" in data["error"]
    assert "nereus engine start" in data["hint"] and result.stderr == ""
    if "--wait" in args:
        assert nothing_queued(offline_home)


def test_engine_unreachable_in_human_mode(offline_home: Path) -> None:
    """Without --json the exit-4 error goes to stderr only, with the hint; stdout is empty."""
    result = run_nereus("message", "list", home=offline_home)
    assert result.code == 4
    assert result.stdout == ""
    assert "the engine is not running" in result.stderr
    assert "hint: start it with `nereus engine start`" in result.stderr


# quickstart --------------------------------------------------------------------------------

def test_quickstart_publishes_and_replays(tmp_path: Path) -> None:
    """quickstart --json: ok, every non-cancelled message published, replays match."""
    home = tmp_path / "qs"
    try:
        result = run_nereus("--json", "quickstart", "--count", "3", "--spread", "1",
                            home=home, timeout=90)
        assert result.code == 0, result.stderr
        data = one_json(result)
        assert data["ok"] is True
        assert data["home"] == str(home)
        expected = set(data["scheduled"]) - {data["cancelled"]}
        assert data["cancelled"] in data["scheduled"]
        assert data["rescheduled"] in expected
        assert {p["delay_message_id"] for p in data["published"]} == expected
        assert data["missing"] == []
        assert data["replays"] and all(r["match"] for r in data["replays"])
        assert {r["shard"] for r in data["replays"]} == set(SHARDS)
        on_disk = {line["delay_message_id"] for line in read_outbox(Path(data["outbox"]))}
        assert on_disk == expected
        assert engine_pid(home) is None
    finally:
        kill_engine(home)


def test_quickstart_numbers_each_step_once(tmp_path: Path) -> None:
    """quickstart as a person reads it: steps 1 to 6, each numbered once and in order (the
    replay of every shard under one step 6, a line a shard)."""
    import re

    home = tmp_path / "qs"
    try:
        result = run_nereus("quickstart", "--count", "3", "--spread", "1", home=home,
                            timeout=90)
        assert result.code == 0, result.stdout + result.stderr
        numbers = re.findall(r"^(\d+)\. ", result.stdout, flags=re.MULTILINE)
        assert numbers == ["1", "2", "3", "4", "5", "6"], result.stdout
        for shard in SHARDS:
            assert re.search(rf"^   {shard}: \d+ records replayed, digest [0-9a-f]{{16}}\.\. "
                             "match the live state$", result.stdout, flags=re.MULTILINE)
    finally:
        kill_engine(home)


def test_a_nereus_package_in_the_working_directory_is_not_imported(home: Path,
                                                                   tmp_path: Path) -> None:
    """``engine start`` from a directory holding a package named ``nereus`` (a checkout, or
    something planted): the daemon runs the installed Nereus (``python -P``), not that."""
    import json
    import os
    import subprocess

    from tests.conftest import NEREUS

    planted = tmp_path / "cwd"
    (planted / "nereus").mkdir(parents=True)
    (planted / "nereus" / "__init__.py").write_text('raise SystemExit("the planted package")\n')
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    started = subprocess.run([NEREUS, "--home", str(home.resolve()), "--json", "engine",
                              "start", "--workers", "1"], cwd=planted, env=environ,
                             capture_output=True, text=True, timeout=90, check=False)
    try:
        assert started.returncode == 0, started.stderr
        assert json.loads(started.stdout)["running"] is True
    finally:
        stop_engine(home)
