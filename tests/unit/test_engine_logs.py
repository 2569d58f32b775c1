"""The engine's log configuration, in process: events as JSON lines of an unchanged shape,
library records at WARNING and above through the same formatter, a moved ``engine.log``
reopened (logrotate without ``copytruncate``), the console in the foreground."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog

from nereus.engine.runtime import log_files as logs


@contextmanager
def _configured(log_dir: Path, *, foreground: bool) -> Iterator[logs.EngineLogs]:
    """``logs.configure`` under the daemon's umask; the process's logging put back after."""
    root = logging.getLogger()
    events = logging.getLogger(logs.EVENTS_LOGGER)
    saved_levels = root.level, events.level
    previous_umask = os.umask(0o077)  # what the daemon runs under (enter_private_mode)
    configured = logs.configure(log_dir, foreground=foreground)
    try:
        yield configured
    finally:
        configured.close()
        os.umask(previous_umask)
        root.setLevel(saved_levels[0])
        events.setLevel(saved_levels[1])
        structlog.reset_defaults()


@pytest.fixture
def engine_logs(tmp_path: Path) -> Iterator[logs.EngineLogs]:
    """A background engine's logs on a fresh log directory."""
    with _configured(tmp_path / "log", foreground=False) as configured:
        yield configured


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_engine_events_keep_their_json_shape(engine_logs: logs.EngineLogs) -> None:
    """An event is one JSON line: its fields, then event, level and an ISO UTC timestamp;
    below INFO nothing is written."""
    engine_logs.logger.info("shard_active", shard="default/0", epoch=1)
    engine_logs.logger.debug("too_fine", shard="default/0")
    engine_logs.logger.error("shard_failed", shard="default/1", reason="LogCorruption")
    first, second = _lines(engine_logs.path)
    assert list(first) == ["shard", "epoch", "event", "level", "timestamp"]
    assert first | {"timestamp": None} == {"shard": "default/0", "epoch": 1,
                                           "event": "shard_active", "level": "info",
                                           "timestamp": None}
    assert first["timestamp"].endswith("Z")
    assert second["event"] == "shard_failed" and second["level"] == "error"


def test_library_records_join_the_file_at_warning_and_above(
        engine_logs: logs.EngineLogs) -> None:
    """Records from libraries' stdlib loggers are JSON lines too, named by their logger,
    with a traceback as one string; their INFO chatter stays out of the file."""
    logging.getLogger("kafka.conn").info("connected to %s", "b1")
    logging.getLogger("nereus.engine.kafka").info("librdkafka chatter")
    logging.getLogger("kafka.conn").warning("broker %s down", "b1")
    try:
        raise ValueError("bad\nbytes")
    except ValueError:
        logging.getLogger("botocore.endpoint").exception("request failed")
    engine_logs.logger.info("engine_started", shards=2)
    warned, failed, started = _lines(engine_logs.path)
    assert warned | {"timestamp": None} == {"event": "broker b1 down", "logger": "kafka.conn",
                                            "level": "warning", "timestamp": None}
    assert failed["logger"] == "botocore.endpoint" and failed["level"] == "error"
    assert "Traceback" in failed["exception"] and "ValueError: bad" in failed["exception"]
    assert list(started) == ["shards", "event", "level", "timestamp"]


def test_a_moved_log_is_reopened_on_the_next_write(engine_logs: logs.EngineLogs) -> None:
    """Renamed aside (logrotate without copytruncate): the next event creates a new
    ``engine.log``, private like the first; the old file keeps what came before."""
    engine_logs.logger.info("before_rotation")
    rotated = engine_logs.path.rename(engine_logs.path.with_name("engine.log.1"))
    engine_logs.logger.info("after_rotation")
    assert [e["event"] for e in _lines(rotated)] == ["before_rotation"]
    assert [e["event"] for e in _lines(engine_logs.path)] == ["after_rotation"]
    assert stat.S_IMODE(engine_logs.path.stat().st_mode) == 0o600


def test_reopen_recreates_a_moved_log_at_once(engine_logs: logs.EngineLogs) -> None:
    """``reopen`` (the daemon's SIGHUP) makes the new file before any event; a log that
    was not moved is left as it is."""
    engine_logs.logger.info("before_rotation")
    assert not engine_logs.reopen()
    assert [e["event"] for e in _lines(engine_logs.path)] == ["before_rotation"]
    engine_logs.path.rename(engine_logs.path.with_name("engine.log.1"))
    assert engine_logs.reopen()
    assert engine_logs.path.read_text() == ""
    assert stat.S_IMODE(engine_logs.path.stat().st_mode) == 0o600
    engine_logs.logger.info("after_rotation")
    assert [e["event"] for e in _lines(engine_logs.path)] == ["after_rotation"]


def test_close_takes_the_handlers_off_the_root_logger(engine_logs: logs.EngineLogs) -> None:
    """After ``close`` nothing more reaches the file."""
    engine_logs.close()
    assert not set(engine_logs.handlers) & set(logging.getLogger().handlers)
    logging.getLogger("kafka.conn").error("after the end")
    assert engine_logs.path.read_text() == ""


def test_the_foreground_console_shows_events_readably(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In the foreground each event is also a readable line on stderr (no JSON there)."""
    with _configured(tmp_path / "log", foreground=True) as configured:
        configured.logger.info("lane_ready", lane="local")
        logging.getLogger("kafka.conn").warning("broker down")
    err = capsys.readouterr().err
    assert "lane_ready" in err and "lane=local" in err and "broker down" in err
    assert not err.lstrip().startswith("{")
    assert [e["event"] for e in _lines(configured.path)] == ["lane_ready", "broker down"]
