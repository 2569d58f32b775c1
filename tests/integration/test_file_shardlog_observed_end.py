"""``FileShardLog.observed_end_position``, where ``shard inspect`` and ``shard list`` read a
file log's end: the same answer as ``end_position`` wherever the log is intact or torn at
its tail, without the append lock or a write when it is intact."""

from __future__ import annotations

import pytest

from nereus.adapters.backends.shardlog import file_tail
from nereus.errors import LogCorruption
from nereus.framing import HEADER_SIZE
from tests.integration.file_segments import OpenFileLog, flip_byte, frame_offsets, log_path_for
from tests.integration.shardlog_contract import payloads
from tests.integration.test_file_shardlog_damage import TORN_TAILS


@pytest.mark.parametrize("segment_bytes", [1 << 20, 200], ids=["one-segment", "rolled"])
def test_the_observed_end_is_the_end_and_takes_no_lock(open_file_log: OpenFileLog,
                                                      segment_bytes: int) -> None:
    """Over one segment or many, the observed end is ``end_position``; reading it creates
    no lock file and changes no byte of the log."""
    writer = open_file_log(segment_bytes=segment_bytes)
    writer.append(payloads("a", 7))
    writer.append(payloads("b", 5))
    writer.close()
    (writer.directory / ".lock").unlink()
    sizes = {p: p.stat().st_size for _, p in writer.segments()}
    reader = open_file_log(segment_bytes=segment_bytes)
    assert reader.observed_end_position() == 12
    assert not (writer.directory / ".lock").exists()
    assert {p: p.stat().st_size for _, p in reader.segments()} == sizes
    assert reader.end_position() == 12


def test_an_empty_log_and_an_empty_last_segment(open_file_log: OpenFileLog) -> None:
    """No segment yet: 0, as ``end_position`` says (it makes the first segment); an empty
    last segment (a writer died right after rolling): its base position."""
    log = open_file_log()
    assert log.observed_end_position() == 0
    log.append(payloads("a", 3))
    log_path_for(log, 3).touch()
    assert open_file_log().observed_end_position() == 3 == log.end_position()


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
def test_a_torn_tail_gets_the_writers_answer(open_file_log: OpenFileLog, tail: bytes) -> None:
    """A torn tail is left to ``end_position`` under the lock (which cuts it, as before):
    the answer is the intact records' end."""
    writer = open_file_log()
    writer.append(payloads("kept", 6))
    last = writer.segments()[-1][1]
    with last.open("ab") as handle:
        handle.write(tail)
    assert open_file_log().observed_end_position() == 6


def test_damage_before_the_tail_is_reported_by_the_writers_path(
        open_file_log: OpenFileLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged header anywhere is handed to ``end_position``, which raises LogCorruption
    as it always did; a damaged payload further back than a torn tail can reach is not
    checked here (readers report it where they meet it): the headers still count it."""
    monkeypatch.setattr(file_tail, "MAX_UNSYNCED_BYTES", 64)  # the checked tail: ~1 frame
    sent = payloads("x", 10)
    writer = open_file_log()
    writer.append(sent)
    path = writer.segments()[-1][1]
    offsets = frame_offsets(sent)
    flip_byte(path, offsets[1] + HEADER_SIZE + 2)  # a payload byte of the second record
    assert open_file_log().observed_end_position() == 10
    flip_byte(path, offsets[2] + 1)  # a length byte of the third record's header
    with pytest.raises(LogCorruption):
        open_file_log().observed_end_position()
