"""Fixtures and byte geometry for the file Shard Log tests: opening logs on one partition
directory (closed after the test), and where each frame and segment lies on disk, so a test
can damage exactly the byte it means to."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import pytest

from nereus.adapters.backends.shardlog.file_log import DEFAULT_SEGMENT_BYTES, FileShardLog
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.errors import LogCorruption
from nereus.framing import HEADER_SIZE


class OpenFileLog(Protocol):
    """``open_file_log(segment_bytes=..., clock_ms=...)``: a new log object on ``log_dir``
    (``clock_ms`` None: the log's own wall clock)."""

    def __call__(self, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 clock_ms: Callable[[], int] | None = None) -> FileShardLog: ...


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "log" / "default" / "0"


@pytest.fixture
def open_file_log(log_dir: Path) -> Iterator[OpenFileLog]:
    """Opens file logs on ``log_dir`` (keyword arguments passed on); closes them after."""
    opened: list[FileShardLog] = []

    def opener(*, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
               clock_ms: Callable[[], int] | None = None) -> FileShardLog:
        log = (FileShardLog(log_dir, segment_bytes=segment_bytes) if clock_ms is None
               else FileShardLog(log_dir, segment_bytes=segment_bytes, clock_ms=clock_ms))
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


def frame_size(payload: bytes) -> int:
    return HEADER_SIZE + len(payload)


def frame_offsets(sent: list[bytes]) -> list[int]:
    """Byte offset of each payload's frame in a segment that holds exactly ``sent``."""
    offsets, at = [], 0
    for payload in sent:
        offsets.append(at)
        at += frame_size(payload)
    return offsets


def log_path_for(log: FileShardLog, base: int) -> Path:
    """Where the segment starting at position ``base`` lives (whether or not it exists)."""
    return log.directory / f"{base:020d}.seg"


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def positions(records: Sequence[LogRecord | Receipt]) -> list[int]:
    return [r.position for r in records]


def assert_corruption_at(excinfo: pytest.ExceptionInfo[LogCorruption], path: Path,
                         offset: int) -> None:
    assert excinfo.value.path == str(path)
    assert excinfo.value.offset == offset
    assert str(offset) in excinfo.value.message
