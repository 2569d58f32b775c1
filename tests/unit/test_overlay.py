"""The batch Overlay defers lanes and counters and commits what per-record writes leave."""

from __future__ import annotations

from nereus import records as r
from nereus.machine import apply, precondition_digest
from nereus.records.codec import encode
from nereus.records.vocabulary import ResultStatus
from nereus.state import keys
from nereus.state.values import decode_int
from nereus.state.view import Overlay
from nereus.testing import MemoryShard
from tests.unit.builders import op, schedule


def test_a_batch_commits_exactly_what_applying_record_by_record_leaves() -> None:
    """Applying a batch through an Overlay commits the same state as one record at a time."""
    log = [encode(schedule(f"m{i}", 1_000 + i)) for i in range(5)] + [b"\xffgarbage"]
    one_by_one = MemoryShard()
    for data in log:
        one_by_one.apply(data)
    base = MemoryShard()
    overlay = Overlay(base)
    for position, data in enumerate(log):
        overlay.merge(apply(overlay, data, position=position, broker_ms=0).writes)
    committed = overlay.finish()
    assert committed == one_by_one.data
    records, applied = committed[keys.META_RECORDS], committed[keys.META_APPLIED]
    assert records is not None and decode_int(records) == len(log)
    assert applied is not None and decode_int(applied) == len(log) - 1


def test_a_raw_read_of_a_deferred_lane_sees_the_bytes_the_batch_will_commit() -> None:
    """A read of a lane deferred to the end of the batch sees the bytes that will be committed."""
    overlay = Overlay(MemoryShard())
    overlay.merge(apply(overlay, encode(schedule("m1")), position=0, broker_ms=0).writes)
    lane_key = keys.lane_key("local")
    assert lane_key in overlay.deferred and lane_key not in overlay.writes
    assert overlay.get(lane_key) == overlay.finish()[lane_key]


def test_an_operator_precondition_planned_mid_batch_matches_the_deferred_lane() -> None:
    """A precondition digest taken mid-batch matches the lane the batch will commit."""
    overlay = Overlay(MemoryShard())
    overlay.merge(apply(overlay, encode(schedule("m1")), position=0, broker_ms=0).writes)
    gate = r.LaneGate(lane="local", gate=r.Gate.CLOSED, **op("close-1"))
    seen = precondition_digest(overlay, gate)
    planned = r.LaneGate(lane="local", gate=r.Gate.CLOSED, precondition_digest=seen,
                         **op("close-1"))
    applied = apply(overlay, encode(planned), position=1, broker_ms=0)
    assert applied.result.status == ResultStatus.APPLIED


class Counting(MemoryShard):
    """A MemoryShard that counts the reads it answers, by key."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[bytes, int] = {}

    def get(self, key: bytes) -> bytes | None:
        self.reads[key] = self.reads.get(key, 0) + 1
        return super().get(key)


def test_a_batch_reads_each_small_base_key_once() -> None:
    """Five SCHEDULEs in one batch read the shard's pause flag, lane limits and the like
    from the base once each, not once per record, and commit what they did before."""
    base = Counting()
    overlay = Overlay(base)
    log = [encode(schedule(f"m{i}", 1_000 + i)) for i in range(5)]
    for position, data in enumerate(log):
        overlay.merge(apply(overlay, data, position=position, broker_ms=0).writes)
    assert base.reads and max(base.reads.values()) == 1, base.reads
    one_by_one = MemoryShard()
    for data in log:
        one_by_one.apply(data)
    assert overlay.finish() == one_by_one.data
