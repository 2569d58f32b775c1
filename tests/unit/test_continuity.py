"""The pure half of "state and log never diverge silently" (``nereus.continuity``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.continuity_checks import guard_file_log
from nereus.continuity import (
    ENDS_BEFORE_APPLIED,
    RECORD_DIFFERS,
    applied_record_differs,
    log_ends_before,
)
from nereus.errors import LogDiverged
from nereus.framing import encode_frame
from nereus.records import QueryBarrier, encode
from nereus.shard import ShardId
from nereus.testing import MemoryShard


def test_a_log_ahead_of_the_state_or_a_state_with_nothing_applied_is_fine() -> None:
    """Records not applied yet are normal; so is an empty store beside any log."""
    assert log_ends_before(None, 0) is None
    assert log_ends_before(4, 5) is None
    assert log_ends_before(4, 9) is None


def test_a_log_that_ends_at_or_before_the_applied_position_has_diverged() -> None:
    """The applied record (and any after it) is gone: the detail says which positions."""
    found = log_ends_before(4, 4)
    assert found is not None and found.problem == ENDS_BEFORE_APPLIED
    assert (found.applied_position, found.log_end) == (4, 4)
    assert "position 4 is missing" in found.detail
    emptied = log_ends_before(4, 0)
    assert emptied is not None and "positions 0..4 are missing" in emptied.detail


def test_the_record_at_the_applied_position_is_compared_by_its_sha256() -> None:
    """The same bytes (even a same-bytes re-delivery, or a rejected record) match; other
    bytes, or no record at all, do not."""
    shard = MemoryShard()
    first = encode(QueryBarrier(command_id="q-1"))
    shard.apply(first)
    assert applied_record_differs(shard.get, 0, 1, first) is None
    shard.apply(first)  # a re-delivery: the result stays the first one's, same SHA-256
    assert applied_record_differs(shard.get, 1, 2, first) is None
    shard.apply(b"not a record")  # rejected: its result is under reject/<position>
    assert applied_record_differs(shard.get, 2, 3, b"not a record") is None

    other = applied_record_differs(shard.get, 2, 3, encode(QueryBarrier(command_id="q-2")))
    assert other is not None and other.problem == RECORD_DIFFERS
    assert "not the one the state applied" in other.detail
    changed = applied_record_differs(shard.get, 2, 3, b"other bad bytes")
    assert changed is not None and "its SHA-256 is" in changed.detail
    unknown = applied_record_differs(shard.get, 0, 3, b"other bad bytes")
    assert unknown is not None and "holds no result for it" in unknown.detail
    missing = applied_record_differs(shard.get, 2, 3, None)
    assert missing is not None and "holds no record there" in missing.detail


def test_a_guarded_file_log_refuses_an_append_at_a_position_the_state_applied(
        tmp_path: Path) -> None:
    """Under its append lock the file log checks its end against the applied position:
    cut below it (even after the log object cached its tail), nothing more goes in."""
    log = FileShardLog(tmp_path)
    log.append([b"a", b"b", b"c"])
    guard_file_log(ShardId("default", 0), log, 2)
    log.append([b"d"])  # ahead of the state: normal
    segment = sorted(tmp_path.glob("*.seg"))[-1]
    with open(segment, "r+b") as handle:  # keep two records: positions 2 and 3 are gone
        handle.truncate(sum(len(encode_frame(0, p)) for p in (b"a", b"b")))
    with pytest.raises(LogDiverged) as refused:
        log.append([b"e"])
    assert refused.value.applied_position == 2 and refused.value.log_end == 2
    assert "shard default/0 has diverged" in refused.value.message
    assert log.end_position() == 2
    log.close()


def test_a_publish_batch_at_the_applied_position_is_proven_by_its_members_results() -> None:
    """A PUBLISH_BATCH leaves no result of its own, only its members': the batch at the
    applied position matches (before: "the state holds no result for it", and an engine
    restarted after a kill -9 at feature level 2 refused the shard as diverged); a batch
    whose last member the state never applied does not."""
    from nereus import records as r
    from nereus.features import PUBLISH_BATCH_LEVEL
    from nereus.records.batch import encode_batch
    from tests.unit.builders import admission, outcome, schedule

    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000), broker_ms=1_000)
    shard.apply(schedule("m2", 1_000), broker_ms=1_000)
    shard.apply(admission(shard, "m1", "a1"), broker_ms=1_000)
    members = [r.encode(outcome("m1", "a1", r.Outcome.PUBLISHED)),
               r.encode(admission(shard, "m2", "a2"))]
    batch = encode_batch(members, PUBLISH_BATCH_LEVEL)
    position = shard.next_position
    shard.apply(batch, broker_ms=1_000)
    assert applied_record_differs(shard.get, position, position + 1, batch) is None
    other = encode_batch([members[0], r.encode(outcome("m2", "a9", r.Outcome.PUBLISHED))],
                         PUBLISH_BATCH_LEVEL)
    differs = applied_record_differs(shard.get, position, position + 1, other)
    assert differs is not None and "last member" in differs.detail
