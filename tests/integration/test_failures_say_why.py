"""Every failure says why, once, where an operator looks: a shard whose log segment was
deleted under a two-worker engine is FAILED with the reason in ``engine status``,
``doctor``, ``message explain`` and the client's error, logged a bounded number of times;
``doctor`` fails while the engine runs without its socket or pid file, or an attempt is
UNCERTAIN past ``--uncertain-after``; a small disk is shown in MiB, and a full one is
named as the reason a shard has no owner."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nereus.shard import partition_for
from tests.conftest import run_nereus
from tests.daemon import stop_engine
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt

pytestmark = pytest.mark.timeout(240)


def _run(home: Path, *args: str) -> tuple[int, Any]:
    result = run_nereus("--json", *args, home=home, timeout=150)
    return result.code, json.loads(result.stdout) if result.stdout.strip() else None


def _json(home: Path, *args: str, code: int = 0) -> Any:
    got, document = _run(home, *args)
    assert got == code, f"nereus {' '.join(args)} exited {got}: {document}"
    return document


def _error_lines(home: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = _json(home, "engine", "logs", "--level", "error")["lines"]
    return lines


def _check(doctor: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in doctor["checks"] if c["name"] == name)
    return found


def _failed_shard(home: Path, shard: str) -> dict[str, Any] | None:
    code, status = _run(home, "engine", "status")
    view = next((s for s in status.get("shards", []) if s["shard"] == shard), None) \
        if code == 1 else None
    return status if view is not None and view["state"] == "FAILED" else None


def test_a_segment_deleted_under_two_workers_fails_its_shard_and_says_why(
        tmp_path: Path) -> None:
    """The segment of ``default/0`` deleted under ``--workers 2``: the shard is FAILED
    with the reason in ``engine status`` (not DEGRADED with a FileNotFoundError, restarted
    every 5 s); over the next 10 s the logs gain no error line and the shard is not taken
    again (before: let go and taken again every round, ~66 error lines a second);
    ``message explain`` names the shard's failure as what holds a message; a schedule to
    that shard is refused naming the divergence; ``doctor`` fails naming the shard."""
    home = tmp_path / "home"
    _json(home, "init", "--partitions", "2")
    _json(home, "engine", "start", "--workers", "2")
    try:
        ids = [f"m{index}" for index in range(40)]
        on_zero = [m for m in ids if partition_for(m, 2) == 0][:3]
        for message in [*on_zero, *[m for m in ids if partition_for(m, 2) == 1][:3]]:
            _json(home, "message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                  message, "--payload", "x", "--wait")
        for segment in (home / "shardlog" / "default" / "0").glob("*.seg"):
            segment.unlink()
        status = wait_until("default/0 FAILED in engine status",
                            lambda: _failed_shard(home, "default/0"), 60)
        view = next(s for s in status["shards"] if s["shard"] == "default/0")
        assert "deleted" in view["error"] or "diverged" in view["error"], view

        errors = len(_error_lines(home))
        deadline = time.monotonic() + 10  # an absence over a span: nothing to await
        while time.monotonic() < deadline:
            assert len(_error_lines(home)) == errors, _error_lines(home)[errors:]
            time.sleep(1)
        logged = _json(home, "engine", "logs", "--shard", "default/0")["lines"]
        assert sum(1 for line in logged if line.get("event") == "shard_taken") <= 2, logged

        explained = _json(home, "message", "explain", on_zero[0])
        assert explained["held_by"] == "shard", explained
        assert "FAILED" in explained["why"] and ("deleted" in explained["why"]
                                                 or "diverged" in explained["why"])
        refused = _json(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--id", on_zero[-1] + "-x", "--payload", "y", code=1) \
            if partition_for(on_zero[-1] + "-x", 2) == 0 else \
            _json(home, "message", "cancel", on_zero[-1], code=1)
        assert "diverged" in refused["error"], refused
        doctor = _json(home, "doctor", code=1)
        assert "default/0 is FAILED" in _check(doctor, "engine")["detail"]
    finally:
        stop_engine(home)


def test_doctor_fails_while_the_engine_runs_without_its_pid_file_or_socket(
        tmp_path: Path) -> None:
    """The pid file deleted under a running engine: ``doctor`` fails saying so. The admin
    socket deleted too: ``doctor`` fails naming both, and ``engine status`` says the
    engine runs (pid) but does not answer (``running`` true, exit 4) instead of "not
    running". ``engine stop`` still stops it. Before: doctor passed, status said not
    running."""
    home = tmp_path / "home"
    _json(home, "init")
    started = _json(home, "engine", "start")
    try:
        (home / "run" / "engine.pid").unlink()
        doctor = _json(home, "doctor", code=1)
        assert "runs without its pid file" in _check(doctor, "engine")["detail"], doctor
        (home / "run" / "admin.sock").unlink()
        doctor = _json(home, "doctor", code=1)
        detail = _check(doctor, "engine")["detail"]
        assert "admin socket" in detail and "pid file" in detail, detail
        status = _json(home, "engine", "status", code=4)
        assert status["running"] is True, status
        assert f"pid {started['pid']}" in status["error"], status
    finally:
        stopped = _json(home, "engine", "stop")
        assert stopped["stopped"] is True
    assert _check(_json(home, "doctor"), "engine")["detail"] == "the engine is not running"


def test_doctor_fails_on_an_attempt_uncertain_past_the_threshold(tmp_path: Path) -> None:
    """An attempt left UNKNOWN (its owner died after its admission): ``doctor`` warns
    (exit 0, naming its lane) with ``--uncertain-after 1h`` and fails with ``0s`` naming
    the attempt and the way to
    settle it, whether the engine runs (asked of it) or not (read from the database)."""
    home = tmp_path / "home"
    _json(home, "init")
    make_unknown_attempt(home)
    _json(home, "engine", "start")
    try:
        wait_until("the attempt UNKNOWN",
                   lambda: _json(home, "attempt", "list", "--state", "unknown") or None, 60)
        for running in (True, False):
            if not running:
                stop_engine(home)
            young = _check(_json(home, "doctor", "--uncertain-after", "1h"), "uncertain")
            assert not young["ok"] and young["severity"] == "warning", young
            assert "lane(s) local (1)" in young["detail"] and "settle-lane" in young["fix"]
            old = _json(home, "doctor", "--uncertain-after", "0s", code=1)
            check = _check(old, "uncertain")
            assert not check["ok"] and "ghost-attempt" in check["detail"], check
            assert "attempt resolve" in check["fix"]
    finally:
        stop_engine(home)


@contextlib.contextmanager
def _small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path`` (skips the test where mounting is not allowed)."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(path)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        wait_until(f"{path} unmounted",
                   lambda: subprocess.run(["umount", str(path)], capture_output=True,
                                          check=False).returncode == 0 or None, 30)


def _disk_named(home: Path) -> dict[str, Any] | None:
    """The status once it names the full disk as why a shard has no owner."""
    code, status = _run(home, "engine", "status")
    return status if code == 1 and any("is full" in p for p in status["problems"]) else None


def test_a_small_disk_is_shown_in_mib_and_a_full_one_is_the_reason_given(
        tmp_path: Path) -> None:
    """A home on a 64 MiB disk: ``doctor`` shows its size in MiB (not "0.0 GiB free of
    0.0 GiB") and fails it (below 1 GiB free). With two workers and the disk filled: the
    shards lose their owners and ``engine status`` says the disk is full; a schedule with
    ``--wait`` is refused naming the full disk (before: "moving between worker
    processes" after 15 s)."""
    with _small_disk(tmp_path / "disk", "64m") as disk:
        home = disk / "home"
        _json(home, "init", "--partitions", "2")
        doctor = _json(home, "doctor", code=1)
        detail = _check(doctor, "disk")["detail"]
        assert detail.endswith("MiB free of 64.0 MiB") and "GiB" not in detail, detail
        _json(home, "engine", "start", "--workers", "2")
        filler = disk / "filler"
        try:
            _json(home, "message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                  "before", "--payload", "x", "--wait")
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"],
                           capture_output=True, check=False)
            wait_until("the full disk in status", lambda: _disk_named(home), 90)
            refused = _json(home, "message", "schedule", "--lane", "local", "--delay", "1h",
                            "--id", "after", "--payload", "x", "--wait", code=1)
            assert "is full" in refused["error"], refused
        finally:
            filler.unlink(missing_ok=True)
            stop_engine(home)
