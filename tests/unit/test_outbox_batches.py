"""The loop's outbox (``engine/shard/outbox.py``) at feature level 2 packs each run of
admissions and outcomes into PUBLISH_BATCH records, in order, never across another record,
cut at the member and byte limits; at level 1 it appends every record as itself."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import cast

from nereus import records as r
from nereus.adapters.backends.shardlog.protocol import Receipt
from nereus.adapters.time_source import SYSTEM_CLOCK
from nereus.engine.runtime.event_log import null_event_log
from nereus.engine.scheduler.admission import PreparedAdmission
from nereus.engine.shard.outbox import BATCH_BYTES, Outbox
from nereus.records.batch import MAX_BATCH_MEMBERS, records_in
from nereus.shard import ShardId
from tests.unit.builders import outcome


class CapturingLog:
    """A Shard Log that keeps what each append was given."""

    def __init__(self) -> None:
        self.appends: list[list[bytes]] = []

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        self.appends.append(list(payloads))
        return []


def _outbox(level: int) -> tuple[Outbox, CapturingLog]:
    log = CapturingLog()
    return Outbox(ShardId("default", 0), log, time=SYSTEM_CLOCK,  # type: ignore[arg-type]
                  events=null_event_log, wake=threading.Event(), feature_level=level), log


def _outcome(n: int, evidence: str = "offset 7") -> bytes:
    return r.encode(outcome(f"m{n}", f"a{n}", r.Outcome.PUBLISHED, oid=f"o{n}",
                            evidence=evidence))


def _admission(n: int) -> PreparedAdmission:
    """A prepared admission as far as the outbox reads one (its attempt id and bytes)."""
    data = r.encode(r.PublishAdmission(
        attempt_id=f"a{n}", delay_message_id=f"m{n}", generation=1, work_digest="w",
        lane="local", claim_id=f"c{n}", claim_sequence=n, owner_id="o", fencing_epoch=1,
        prepared_digest="p", decided_earliest_ms=1, decided_latest_ms=2))
    return cast(PreparedAdmission, SimpleNamespace(attempt_id=f"a{n}", data=data))


def _fill(box: Outbox) -> list[bytes]:
    """Two outcomes, a claim result, three admissions (one dropped), a sweep: in order."""
    other = r.encode(r.Sweep(mutation_id="sw", owner_id="o", fencing_epoch=1, entries=()))
    claim_result = r.encode(r.ClaimResult(
        mutation_id="cr", delay_message_id="m9", generation=1, work_digest="w", owner_id="o",
        fencing_epoch=1, disposition=r.ClaimDisposition.EXPIRED, decided_earliest_ms=1,
        decided_latest_ms=2))
    box.add_outcome(_outcome(1))
    box.add_outcome(_outcome(2))
    box.add([claim_result])
    box.add_admissions([_admission(3), _admission(4), _admission(5)])
    box.drop_admissions({"a4"})
    box.add([other])
    return [_outcome(1), _outcome(2), claim_result, _admission(3).data, _admission(5).data,
            other]


def test_level_1_appends_every_record_as_itself() -> None:
    """At level 1 nothing is batched: the log gets exactly the records, in order."""
    box, log = _outbox(1)
    expected = _fill(box)
    assert box.flush()
    assert log.appends == [expected]


def test_level_2_batches_each_run_of_admissions_and_outcomes_in_order() -> None:
    """At level 2 the two outcomes are one batch and the two admissions another; the claim
    result and the sweep between and after them stay records of their own, in place."""
    box, log = _outbox(2)
    expected = _fill(box)
    assert box.flush()
    (payloads,) = log.appends
    assert [type(r.decode(p)) for p in payloads] == [r.PublishBatch, r.ClaimResult,
                                                     r.PublishBatch, r.Sweep]
    assert [m for p in payloads for m in records_in(p)] == expected


def test_a_lone_record_stays_itself_and_long_runs_are_cut() -> None:
    """One outcome alone is not wrapped; a run longer than the member limit, or than the
    byte limit, becomes several batches, every member kept in order."""
    box, log = _outbox(2)
    box.add_outcome(_outcome(0))
    box.flush()
    assert log.appends[-1] == [_outcome(0)]
    many = [_outcome(n) for n in range(MAX_BATCH_MEMBERS + 5)]
    for data in many:
        box.add_outcome(data)
    box.flush()
    assert [len(records_in(p)) for p in log.appends[-1]] == [MAX_BATCH_MEMBERS, 5]
    big = [_outcome(n, evidence="x" * 40_000) for n in range(10)]
    for data in big:
        box.add_outcome(data)
    box.flush()
    sizes = [sum(map(len, records_in(p))) for p in log.appends[-1]]
    assert len(sizes) > 1 and max(sizes) <= BATCH_BYTES
    assert [m for p in log.appends[-1] for m in records_in(p)] == big
