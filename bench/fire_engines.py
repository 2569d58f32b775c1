"""What the fire scenarios watch the engine through: the engine in this process, or the
daemon (``nereus engine start --workers N``) with its worker processes.

Both give the scenarios the bench's own Shard Logs (the file log's ``flock`` keeps their
appends apart from the engine's, in any number of processes) and a ``Probe``: how many
were published (the in-process publishers' counters; for the daemon, the outbox's lines,
read incrementally), whether every shard applied its log to a point, the messages by state
(the lanes' replicated counters, over the admin socket for the daemon), and the CPU time
the engine's processes used (``/proc`` for the daemon: the front door and its workers).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from inprocess_engine import ShardLogs, all_published, applied_through, message_states, running
from nereus.config import Config
from nereus.engine.process.home_engine import Engine
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from process_tree import tree_cpu_s


class Probe(Protocol):
    max_error_ms: int

    def published(self) -> int: ...

    def applied_through(self, ends: dict[ShardId, int]) -> bool: ...

    def states(self) -> dict[str, int]: ...

    def all_published(self, count: int) -> bool: ...

    def cpu_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Watched:
    probe: Probe
    logs: ShardLogs


class InProcess:
    """The engine in this process."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        assert engine.clock is not None
        self.max_error_ms = engine.clock.max_error_ms

    def published(self) -> int:
        return sum(p.published for p in self.engine.publishers.values())

    def applied_through(self, ends: dict[ShardId, int]) -> bool:
        return applied_through(self.engine, ends)

    def states(self) -> dict[str, int]:
        return message_states(self.engine)

    def all_published(self, count: int) -> bool:
        return all_published(self.engine, count)

    def cpu_s(self) -> float:
        """CPU time of the engine's threads: the process's less the calling thread's (the
        bench's main thread, which queues and polls; only it calls this)."""
        import time

        return time.process_time() - time.thread_time()


class Daemon:
    """The daemon of ``home`` (pid ``pid``) and its worker processes."""

    def __init__(self, home: Path, config: Config, pid: int) -> None:
        from nereus.adapters.admin.admin_client import AdminClient
        from nereus.adapters.home.home_lock import socket_path

        self.admin = AdminClient(socket_path(home), timeout=30)
        self.outbox = HomeLayout(home).outbox / "local.jsonl"
        self.max_error_ms = config.engine.max_clock_error_ms
        self.pid = pid
        self._lines = 0
        self._offset = 0

    def published(self) -> int:
        try:
            size = os.stat(self.outbox).st_size
        except FileNotFoundError:
            return 0
        if size > self._offset:
            with open(self.outbox, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(size - self._offset)
            self._offset += len(data)
            self._lines += data.count(b"\n")
        return self._lines

    def applied_through(self, ends: dict[ShardId, int]) -> bool:
        shards = self.admin.get("/v1/shards")["shards"]
        applied = {s["shard"]: s["applied_position"] for s in shards}
        return all((applied.get(str(shard)) or -1) >= end - 1 for shard, end in ends.items())

    def states(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for lane in self.admin.get("/v1/lanes")["lanes"]:
            for state, n in lane["messages_by_state"].items():
                counts[state] = counts.get(state, 0) + n
        return {state: n for state, n in sorted(counts.items()) if n}

    def all_published(self, count: int) -> bool:
        return self.states().get("PUBLISHED", 0) >= count

    def cpu_s(self) -> float:
        """utime + stime of the front door and its children (the worker processes)."""
        return tree_cpu_s(self.pid)


@contextmanager
def watched(home: Path, config: Config, workers: int | None) -> Iterator[Watched]:
    """The engine on ``home``: in this process (``workers`` None), or the daemon with
    ``workers`` processes (1: today's single daemon); stopped on exit."""
    if workers is None:
        with running(home, config) as run:
            yield Watched(InProcess(run.engine), run.logs)
        return
    from nereus.adapters.admin.engine_process import start_engine, stop_engine

    layout = HomeLayout(home)
    started = start_engine(layout, 120, print, workers=workers)
    try:
        logs = ShardLogs(home, config)
        try:
            yield Watched(Daemon(home, config, started.pid), logs)
        finally:
            logs.close()
    finally:
        stop_engine(layout, 120)
