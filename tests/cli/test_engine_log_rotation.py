"""``engine.log`` can be rotated under a running engine the way ``logrotate`` does it:
renamed aside (with or without ``create`` making an empty file in its place, no
``copytruncate``), the engine writes its next events to a new ``engine.log``; a SIGHUP
(logrotate's ``postrotate``) recreates it at once and does not stop the engine."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_nereus
from tests.daemon import kill_engine, running_engine
from tests.polling import wait_until


def _events(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` as JSON (a line that is not JSON fails the test)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def _names(path: Path) -> list[str]:
    return [event["event"] for event in _events(path)]


def _rotate(log: Path, *, create: bool) -> Path:
    """What logrotate does without copytruncate: rename, then maybe an empty new file."""
    rotated = log.rename(log.with_name("engine.log.1"))
    if create:
        log.touch(mode=0o600)
    return rotated


@pytest.mark.parametrize("create", [False, True], ids=["nocreate", "create"])
def test_a_rotated_engine_log_is_reopened_with_the_new_events(home: Path, create: bool) -> None:
    """engine.log renamed under a running engine (logrotate without copytruncate): new events
    go to a new 0600 engine.log, old ones stay in the renamed file."""
    log = home / "log" / "engine.log"
    with running_engine(home):
        wait_until("the engine's start in engine.log", lambda: "admin_socket_ready" in _names(log),
                   30)
        scheduled = run_nereus("message", "schedule", "--lane", "local", "--delay", "1h",
                               "--payload", "x", "--id", "rotated-1", "--wait", home=home)
        assert scheduled.code == 0, scheduled.stderr
        rotated = _rotate(log, create=create)
        taken = run_nereus("--json", "checkpoint", "create", "default/0", home=home)
        assert taken.code == 0, taken.stderr
        checkpoint_id = taken.json()["checkpoint_id"]
        wait_until("checkpoint_taken in a new engine.log",
                   lambda: log.exists() and "checkpoint_taken" in _names(log), 30)
    old, new = _events(rotated), _events(log)
    assert {"engine_started", "admin_socket_ready"} <= {e["event"] for e in old}
    assert not {"checkpoint_taken", "engine_stopping", "engine_exit"} & {e["event"] for e in old}
    (event,) = [e for e in new if e["event"] == "checkpoint_taken"]
    assert event["checkpoint_id"] == checkpoint_id and event["level"] == "info"
    assert event["timestamp"].endswith("Z")
    assert {"engine_stopping", "engine_exit"} <= {e["event"] for e in new}
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_sighup_recreates_a_rotated_engine_log_at_once(home: Path) -> None:
    """logrotate's ``postrotate`` SIGHUP: a new ``engine.log`` saying so at once, the
    engine still up; a SIGHUP with nothing moved is only noted."""
    log = home / "log" / "engine.log"
    with running_engine(home):
        wait_until("the engine's start in engine.log", lambda: "admin_socket_ready" in _names(log),
                   30)
        rotated = _rotate(log, create=False)
        assert kill_engine(home, signal.SIGHUP) is not None
        wait_until("log_reopened in a new engine.log",
                   lambda: log.exists() and "log_reopened" in _names(log), 30)
        assert kill_engine(home, signal.SIGHUP) is not None  # nothing moved this time
        wait_until("log_not_moved in the same engine.log", lambda: "log_not_moved" in _names(log),
                   30)
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 0, status.stderr
    assert "log_reopened" not in _names(rotated)
    assert _names(log)[:2] == ["log_reopened", "log_not_moved"]
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
