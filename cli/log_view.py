"""What ``nereus engine logs`` reads and keeps: the engine's JSON log lines, filtered.

The daemon writes one JSON object per line to ``<home>/log/engine.log``, and each worker
process to ``worker-<K>.log`` beside it (``nereus.engine.runtime.log_files``). A line is kept when
it passes every filter given: its level at least ``--level``, its ``shard`` the one named, its
``timestamp`` not before ``--since``, and for ``--message ID`` the lines that name the
message, or an attempt or claim first seen on a line that names it (so a message's story
includes the lines of its attempts). Lines from several files are merged in timestamp
order. A line that is not a JSON object (a torn write, a stray print) is kept as text
under ``event`` with level ``unparsed``, so nothing in the file is hidden.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeAlias

LogLine: TypeAlias = dict[str, object]
"""One line of the log: the JSON object the engine wrote, of whatever fields it wrote, each
read by name and checked where it is used (``parse_line`` makes one of anything else)."""

LEVELS: Final = ("debug", "info", "warning", "error", "critical")
_RANK: Final = {name: n for n, name in enumerate(LEVELS)}
_LINKED: Final = ("attempt_id", "claim_id")  # ids that tie a line to a message's story


def log_files(log_dir: Path) -> list[Path]:
    """The daemon's log and each worker's, those that exist."""
    files = [log_dir / "engine.log", *sorted(log_dir.glob("worker-*.log"))]
    return [path for path in files if path.is_file()]


def parse_line(raw: str) -> LogLine:
    """One log line as its JSON object; anything else kept as text."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    return {"event": raw.rstrip("\n"), "level": "unparsed", "timestamp": ""}


@dataclass
class LogFilter:
    """The filters of one ``engine logs`` run (module docstring)."""

    level: str | None = None
    shard: str | None = None
    message: str | None = None
    since: str | None = None  # an ISO-8601 UTC timestamp, as the log writes them
    linked: set[str] = field(default_factory=set)  # attempt and claim ids of ``message``

    def keeps(self, line: LogLine) -> bool:
        if self.level is not None and \
                _RANK.get(str(line.get("level")), len(LEVELS)) < _RANK[self.level]:
            return False
        if self.shard is not None and line.get("shard") != self.shard:
            return False
        if self.since is not None and str(line.get("timestamp", "")) < self.since:
            return False
        if self.message is not None:
            return self._tells_the_message(line)
        return True

    def link(self, lines: Iterable[LogLine]) -> None:
        """Learn the attempt and claim ids of ``message`` from every line naming it, so a
        line about one of its attempts is kept even when it comes first (a worker's line
        written a moment before the line that names the message)."""
        if self.message is None:
            return
        for line in lines:
            if line.get("delay_message_id") == self.message:
                self.linked.update(str(line[name]) for name in _LINKED if line.get(name))

    def _tells_the_message(self, line: LogLine) -> bool:
        if line.get("delay_message_id") == self.message:
            self.linked.update(str(line[name]) for name in _LINKED if line.get(name))
            return True
        return any(str(line.get(name)) in self.linked for name in _LINKED if line.get(name))


def read_lines(files: Iterable[Path]) -> list[LogLine]:
    """Every line of ``files``, merged in timestamp order (stable within a file)."""
    lines: list[LogLine] = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines.extend(parse_line(raw) for raw in handle if raw.strip())
    lines.sort(key=lambda line: str(line.get("timestamp", "")))
    return lines


class Follower:
    """New lines of the log files as they are written, across rotations: a file whose path
    now names another file (logrotate renamed it, the daemon reopened) is read from the
    start of the new one."""

    def __init__(self, log_dir: Path) -> None:
        self._dir = log_dir
        self._at: dict[Path, tuple[int, int]] = {}  # path -> (inode, offset)
        for path in log_files(log_dir):
            stat = path.stat()
            self._at[path] = (stat.st_ino, stat.st_size)

    def poll(self) -> Iterator[LogLine]:
        """Lines appended since the last poll (whole lines only)."""
        for path in log_files(self._dir):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            inode, offset = self._at.get(path, (stat.st_ino, 0))
            if inode != stat.st_ino or stat.st_size < offset:
                inode, offset = stat.st_ino, 0
            if stat.st_size == offset:
                self._at[path] = (inode, offset)
                continue
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(stat.st_size - offset)
            complete = data.rfind(b"\n") + 1
            self._at[path] = (inode, offset + complete)
            for raw in data[:complete].decode("utf-8", errors="replace").splitlines():
                if raw.strip():
                    yield parse_line(raw)


def since_timestamp(text: str, now_ms: int) -> str:
    """``--since``: a duration ago (``10m``, ``2h``) or a time (ISO-8601, epoch ms), in the
    log's own form (ISO-8601 UTC to the microsecond), to compare timestamps as strings."""
    from datetime import UTC, datetime

    from nereus.errors import UsageError
    from nereus.timespec import parse_duration_ms, parse_time_ms

    try:
        at_ms = now_ms - parse_duration_ms(text, field="--since")
    except UsageError:
        at_ms = parse_time_ms(text, field="--since")
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def render_fields(line: LogLine) -> str:
    """The fields of a line other than timestamp, level, event and shard, as k=v."""
    skip = {"timestamp", "level", "event", "shard"}
    return " ".join(f"{key}={_short(value)}" for key, value in line.items() if key not in skip)


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if " " not in text else json.dumps(text)
