"""The signals a running engine answers, whichever of its threads the kernel hands them to.

SIGTERM stops it even when a thread other than the main one takes the signal (a
process-directed signal may go to any thread that does not block it); SIGQUIT asks it for
the stack of every thread it has (written to ``<home>/log/engine.out``) and changes nothing
else: what an operator sends a daemon that does not stop, before deciding to SIGKILL it."""

from __future__ import annotations

import ctypes
import json
import signal
from pathlib import Path

import pytest

from tests.conftest import run_nereus
from tests.daemon import engine_pid, kill_engine, process_gone, running_engine
from tests.polling import wait_until


def _events(home: Path) -> list[str]:
    log = home / "log" / "engine.log"
    return [json.loads(line)["event"] for line in log.read_text().splitlines()]


def _threads_taking(pid: int, signum: int) -> list[int]:
    """The threads of ``pid`` other than its main one that do not block ``signum``."""
    taking = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        if int(task.name) == pid:
            continue
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        blocked = int(next(line.split()[1] for line in status.splitlines()
                           if line.startswith("SigBlk:")), 16)
        if not blocked >> (signum - 1) & 1:
            taking.append(int(task.name))
    return taking


@pytest.mark.parametrize("workers", [1, 2], ids=["daemon", "front-door"])
def test_a_sigterm_taken_by_another_thread_still_stops_the_engine(home: Path,
                                                                   workers: int) -> None:
    """SIGTERM sent to one thread of the daemon that is not its main one (as the kernel may
    deliver a signal sent to the process): the engine stops as it does for any SIGTERM
    (``engine_stopping`` ... ``engine_exit``, the process gone)."""
    started = run_nereus("--json", "engine", "start", "--workers", str(workers),
                         "--timeout", "30", home=home, timeout=60)
    assert started.code == 0, started.stderr
    pid = engine_pid(home)
    assert pid is not None
    try:
        taking = _threads_taking(pid, signal.SIGTERM)
        assert taking, f"every thread of {pid} but the main one blocks SIGTERM"
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.tgkill(pid, taking[-1], signal.SIGTERM) == 0, ctypes.get_errno()
        wait_until(f"the engine (pid {pid}) to stop after a SIGTERM to thread "
                      f"{taking[-1]}", lambda: process_gone(pid), 30)
    finally:
        if kill_engine(home) is not None:
            wait_until("the engine killed", lambda: process_gone(pid), 10)
    events = _events(home)
    assert "engine_stopping" in events and events[-1] == "engine_exit", events[-5:]


def test_sigquit_writes_every_threads_stack_and_the_engine_runs_on(home: Path) -> None:
    """After SIGQUIT, engine.out holds the main thread's stack (in the daemon's main loop)
    and those of the other threads; the engine still answers, and a SIGTERM later stops it
    cleanly."""
    out = home / "log" / "engine.out"
    with running_engine(home):
        before = out.stat().st_size if out.exists() else 0
        assert kill_engine(home, signal.SIGQUIT) is not None
        dump = wait_until("the stacks in engine.out", lambda: _dump_after(out, before), 30)
        assert dump.count("most recent call first") >= 2, dump  # the main thread and more
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 0, status.stderr
        assert "engine_stopping" not in _events(home)
    assert _events(home)[-1] == "engine_exit"


def _dump_after(out: Path, offset: int) -> str | None:
    """What engine.out got after ``offset`` once it holds the main thread's stack
    (``Current thread``, written last) down to the daemon's own code."""
    if not out.exists():
        return None
    text = out.read_bytes()[offset:].decode(errors="replace")
    _, marker, main_thread = text.partition("Current thread")
    return text if marker and "engine/" in main_thread else None
