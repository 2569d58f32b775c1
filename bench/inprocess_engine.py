"""An in-process engine as ``bench/fire.py`` and ``bench/brokers.py`` drive it.

A fresh home holds the config; the engine runs in this process with the daemon's default
``EngineSettings``; the bench queues SCHEDULE commands to the route's shards through its
own Shard Logs (the file log's ``flock`` keeps its appends apart from the engine's, a
broker log is a topic anyway) and polls the engine, every wait with a deadline. Lateness
figures are percentiles of whole milliseconds.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.protocol import ShardLog
from nereus.client import RouteRef, prepare_schedule, queue
from nereus.config import Config, parse_config
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.process.home_engine import Engine
from nereus.layout import HomeLayout
from nereus.shard import ShardId

ROUTE = "default"  # the one route of every bench home
PAYLOAD = b'{"order": 1234567, "action": "remind", "note": "' + b"x" * 48 + b'"}'


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def percentile(sorted_values: list[int], q: float) -> int:
    """The value at rank ``q`` (0..1) of ``sorted_values``, rounded to the nearest index."""
    if not sorted_values:
        return 0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


# a home and its engine -------------------------------------------------------------------
def new_home(root: Path, prefix: str, text: str) -> tuple[Path, Config]:
    """A fresh home under ``root`` whose config file holds ``text``, and that config."""
    home = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    layout = HomeLayout(home)
    layout.config.write_text(text)
    return home, parse_config(text, source=str(layout.config))


def home_config(home: Path) -> Config:
    """The config of a home made by ``new_home`` (for a process that did not make it)."""
    layout = HomeLayout(home)
    return parse_config(layout.config.read_text(), source=str(layout.config))


class ShardLogs:
    """The bench's own Shard Logs, one per shard of the route; ``queue`` takes it as
    ``log_for``."""

    def __init__(self, home: Path, config: Config) -> None:
        settings = config.routes[ROUTE]
        self.route = RouteRef(ROUTE, settings.partitions)
        self._logs: dict[ShardId, ShardLog] = {}
        try:
            for p in range(settings.partitions):
                shard = ShardId(ROUTE, p)
                self._logs[shard] = open_shard_log(settings, shard, home)
        except BaseException:
            self.close()
            raise

    def __call__(self, shard: ShardId) -> ShardLog:
        return self._logs[shard]

    def end_positions(self) -> dict[ShardId, int]:
        return {shard: log.end_position() for shard, log in self._logs.items()}

    def close(self) -> None:
        for log in self._logs.values():
            log.close()


@dataclass(frozen=True, slots=True)
class Running:
    engine: Engine
    logs: ShardLogs


@contextmanager
def running(home: Path, config: Config) -> Iterator[Running]:
    """The engine started on ``home``, and the bench's own logs; both closed on exit."""
    engine = Engine(home, config, settings=EngineSettings.from_config(config.engine))
    engine.start()
    try:
        logs = ShardLogs(home, config)
        try:
            yield Running(engine, logs)
        finally:
            logs.close()
    finally:
        engine.stop()


# queueing --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Due:
    """One SCHEDULE to queue: its delay message id, key and deliver_at."""

    message_id: str
    key: str
    deliver_at_ms: int


def queue_due(logs: ShardLogs, due: Iterable[Due], *, lane: str,
              headers: dict[str, str] | None = None, group: int = 1_000) -> None:
    """Queue a SCHEDULE of ``PAYLOAD`` for each of ``due``, ``group`` at a time (one
    synced append per shard per group)."""
    prepared = []
    for one in due:
        prepared.append(prepare_schedule(
            logs.route, command_id=uuid.uuid4().hex, delay_message_id=one.message_id,
            lane=lane, deliver_at_ms=one.deliver_at_ms, key=one.key, headers=headers,
            payload=PAYLOAD))
        if len(prepared) == group:
            queue(prepared, logs)
            prepared = []
    if prepared:
        queue(prepared, logs)


# what the engine did ---------------------------------------------------------------------
def wait_for(condition: Callable[[], bool], deadline_s: float,
             interval_s: float = 0.005) -> float | None:
    """The monotonic time at which ``condition`` held (polled), or None at the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return time.monotonic()
        time.sleep(interval_s)
    return None


def applied_through(engine: Engine, ends: dict[ShardId, int]) -> bool:
    """Every shard has applied its log up to (not including) its end in ``ends``."""
    return all((engine.shards[s].applied_position or -1) >= e - 1 for s, e in ends.items())


def message_states(engine: Engine) -> dict[str, int]:
    """Messages by state over every shard (the lanes' replicated counters)."""
    counts: Counter[str] = Counter()
    for loop in engine.shards.values():
        for lane in loop.lanes().values():
            counts.update(lane.counts)
    return {state: n for state, n in sorted(counts.items()) if n}


def all_published(engine: Engine, count: int) -> bool:
    """``count`` messages are PUBLISHED in the shards' state (their outcomes applied)."""
    return message_states(engine).get("PUBLISHED", 0) >= count
