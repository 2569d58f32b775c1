"""An engine in the test's own process on a temporary home (``in_process_engine``), for
tests that inject a clock, a destination or an event log, or read a shard's store while it
runs; commands are queued straight to the file Shard Log, as the CLI does. A test that
drives the engine as an operator does uses ``tests.daemon.running_engine`` instead.

With ``time_source`` (a ``tests.fake_clock.FakeClock``) the engine, its file Shard Logs'
broker time and the records this harness appends all read that one clock: deadlines pass
when the test advances it, never because the test slept."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nereus.adapters.backends.destination.protocol import Destination
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.time_source import Clock
from nereus.client import Prepared, RouteRef, prepare_cancel, prepare_reschedule, prepare_schedule
from nereus.config import Config, parse_config
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.process.home_engine import Engine
from nereus.engine.runtime.event_log import EventLog, null_event_log
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.timespec import parse_time_ms

CONFIG = """
[routes.default]
log = "file"
partitions = {partitions}

{lanes}
"""


def file_lane(name: str, path: str) -> str:
    return f'[lanes.{name}]\ndestination = "file"\npath = "{path}"\n'


class Events:
    """An engine's events, kept for a test's assertions (an ``EventLog``)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, object]]] = []

    def __call__(self, event: str, /, **fields: object) -> None:
        self.seen.append((event, fields))

    def named(self, event: str) -> list[dict[str, object]]:
        return [fields for name, fields in self.seen if name == event]


class Harness:
    def __init__(self, home: Path, engine: Engine, partitions: int) -> None:
        self.home = home
        self.engine = engine
        self.route = RouteRef("default", partitions, engine.config.ordered_lanes)
        self.layout = HomeLayout(home)
        self._logs: dict[ShardId, FileShardLog] = {}
        self._n = 0

    def _id(self) -> str:
        self._n += 1
        return f"cmd-{self._n}"

    def queue(self, prepared: list[Prepared]) -> None:
        by_shard: dict[ShardId, list[bytes]] = {}
        for item in prepared:
            by_shard.setdefault(item.shard, []).append(item.data)
        for shard, payloads in by_shard.items():
            self.append(shard, payloads)

    def append(self, shard: ShardId, payloads: list[bytes]) -> None:
        """Append raw records (operator mutations, forged system records) to a shard's log."""
        log = self._logs.get(shard)
        if log is None:
            log = self._logs[shard] = FileShardLog(self.layout.shard_log(shard),
                                                   clock_ms=self.clock.wall_ms)
        log.append(payloads)

    @property
    def clock(self) -> Clock:
        """The engine's Clock (the system's unless the test injected one)."""
        assert self.engine.time_source is not None
        return self.engine.time_source

    def schedule(self, mid: str, deliver_at_ms: int, lane: str = "local",
                 **fields: Any) -> Prepared:
        return prepare_schedule(self.route, command_id=self._id(), delay_message_id=mid,
                                lane=lane, deliver_at_ms=deliver_at_ms, **fields)

    def cancel(self, mid: str) -> Prepared:
        return prepare_cancel(self.route, command_id=self._id(), delay_message_id=mid)

    def reschedule(self, mid: str, deliver_at_ms: int) -> Prepared:
        return prepare_reschedule(self.route, command_id=self._id(), delay_message_id=mid,
                                  deliver_at_ms=deliver_at_ms)

    def outbox(self, name: str = "outbox/local.jsonl") -> list[dict[str, Any]]:
        path = self.home / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def close(self) -> None:
        for log in self._logs.values():
            log.close()


def lateness_ms(line: dict[str, Any]) -> int:
    return parse_time_ms(line["published_at"]) - parse_time_ms(line["deliver_at"])


@contextmanager
def in_process_engine(
    home: Path,
    *,
    partitions: int = 2,
    lanes: str | None = None,
    config: Config | None = None,
    clock: TrustedClock | None = None,
    time_source: Clock | None = None,
    destinations: dict[str, Destination] | None = None,
    settings: EngineSettings | None = None,
    log_event: EventLog = null_event_log,
    start_within_s: float | None = None,
) -> Iterator[Harness]:
    """The engine on ``home`` for the block, stopped on the way out. Its ``nereus.toml`` is
    ``partitions`` file-log shards and ``lanes`` (one file lane ``local`` by default), or
    ``config`` as the test already wrote it. With ``start_within_s`` the engine starts on a
    thread and the test fails if the start has not returned by then (a start held up by a
    destination fails the test, not the run)."""
    if config is None:
        home.mkdir(parents=True, exist_ok=True)
        text = CONFIG.format(partitions=partitions,
                             lanes=lanes or file_lane("local", "outbox/local.jsonl"))
        (home / "nereus.toml").write_text(text)
        config = parse_config(text, source=str(home / "nereus.toml"))
    engine = Engine(home, config, settings=settings or EngineSettings(), clock=clock,
                    time_source=time_source, destinations=destinations, log_event=log_event)
    starter = _Starter(engine, start_within_s)
    harness = Harness(home, engine, config.routes["default"].partitions)
    try:
        starter.check()
        yield harness
    finally:
        starter.join()
        harness.close()
        engine.stop()


class _Starter:
    """``engine.start()``: inline, or on a thread whose start must return in ``within_s``."""

    def __init__(self, engine: Engine, within_s: float | None) -> None:
        self.within_s = within_s
        self.failed: list[BaseException] = []
        self.thread: threading.Thread | None = None
        if within_s is None:
            engine.start()
            return

        def start() -> None:
            try:
                engine.start(timeout_s=within_s)
            except BaseException as exc:
                self.failed.append(exc)

        self.thread = threading.Thread(target=start, name="test-engine-start", daemon=True)
        self.thread.start()
        self.thread.join(within_s)

    def check(self) -> None:
        if self.thread is not None:
            assert not self.thread.is_alive(), \
                f"engine start did not return within {self.within_s} s"
            assert not self.failed, self.failed

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join(30)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
