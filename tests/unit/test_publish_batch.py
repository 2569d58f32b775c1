"""PUBLISH_BATCH (``nereus.records.batch``): one turn's admissions and outcomes as one
record. Applying a batch equals applying its members one by one at its position (same
state, same digest, each member its own result); the kind is written and read only at the
feature level that allows it; a batch with a member that is not a canonical admission or
outcome is rejected whole."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nereus import records as r
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.features import BASE_LEVEL, PUBLISH_BATCH_LEVEL, SUPPORTED_LEVEL, FeatureLevelError
from nereus.machine import apply
from nereus.machine.events import Admitted, AttemptSettled, ObligationClosed, ObligationOpened
from nereus.records.batch import encode_batch, member_bytes
from nereus.state import keys
from nereus.state.digest import digest_pairs, digest_sorted
from nereus.state.store import ShardStore, identity_writes
from nereus.state.values import Result
from nereus.testing import MemoryShard
from tests.unit.builders import admission, outcome, schedule
from tests.unit.logs import IDENTITY, ListLog, LogEntries, shard_logs

BATCHABLE = (r.PublishAdmission, r.PublishOutcome)


def _groups(entries: LogEntries, cuts: list[bool]) -> list[list[tuple[bytes, int]]]:
    """``entries`` in groups: a run of admissions and outcomes is split where ``cuts`` says
    (and at a change of broker time); every other record is a group of its own."""
    groups: list[list[tuple[bytes, int]]] = []
    for index, (data, ms) in enumerate(entries):
        batchable = isinstance(r.decode(data), BATCHABLE)
        last = groups[-1] if groups else None
        if batchable and last and isinstance(r.decode(last[-1][0]), BATCHABLE) \
                and last[-1][1] == ms and not cuts[index % len(cuts)]:
            last.append((data, ms))
        else:
            groups.append([(data, ms)])
    return groups


def _one_by_one(groups: list[list[tuple[bytes, int]]]) -> tuple[dict[bytes, bytes], list[Result]]:
    """Each group's records applied one by one, each at its group's position."""
    state = {k: v for k, v in identity_writes(IDENTITY).items() if v is not None}
    view = MemoryShard()
    view.data = state
    results: list[Result] = []
    for position, group in enumerate(groups):
        for data, ms in group:
            applied = apply(view, data, position=position, broker_ms=ms)
            results.append(applied.result)
            for key, value in applied.writes.items():
                if value is None:
                    state.pop(key, None)
                else:
                    state[key] = value
    return state, results


def _batched(groups: list[list[tuple[bytes, int]]]) -> LogEntries:
    """The log a level-2 owner appends: a group of several records as one PUBLISH_BATCH."""
    return [(encode_batch([d for d, _ in g], PUBLISH_BATCH_LEVEL) if len(g) > 1 else g[0][0],
             g[0][1]) for g in groups]


@settings(max_examples=40, deadline=None)
@given(shard_logs(max_ops=50), st.lists(st.booleans(), min_size=1, max_size=8), st.data())
def test_a_batch_applies_as_its_members_one_by_one(entries: LogEntries, cuts: list[bool],
                                                   data: st.DataObject) -> None:
    """Replay-equal: the batched log, applied in memory and by the runner into RocksDB in
    synced batches of any size, leaves the state (and digest) of its members applied one
    by one at the batch's position, and each member its own result."""
    groups = _groups(entries, cuts)
    expected_state, expected_results = _one_by_one(groups)
    batched = _batched(groups)
    shard = MemoryShard(identity=IDENTITY)
    results: list[Result] = []
    for raw, ms in batched:
        applied = shard.apply(raw, broker_ms=ms)
        results.extend(m.result for m in applied.members) if applied.members else \
            results.append(applied.result)
    assert shard.data == expected_state
    assert results == expected_results
    size = data.draw(st.integers(min_value=1, max_value=6))
    with TemporaryDirectory() as tmp, \
            ShardStore.open(Path(tmp) / "db", identity=IDENTITY, create=True) as store:
        ShardRunner(store, ListLog(batched), batch_records=size).run_until_caught_up()
        assert digest_sorted(store.scan(b"\x00", b"\x80")) == digest_pairs(
            expected_state.items())


def _published_pair(shard: MemoryShard) -> tuple[bytes, bytes]:
    """An admission of m1 (applied alone) and two records for one batch: m1's outcome and
    m2's admission."""
    shard.apply(schedule("m1", 1_000), broker_ms=1_000)
    shard.apply(schedule("m2", 1_000), broker_ms=1_000)
    shard.apply(admission(shard, "m1", "a1"), broker_ms=1_000)
    return (r.encode(outcome("m1", "a1", r.Outcome.PUBLISHED)),
            r.encode(admission(shard, "m2", "a2")))


def test_members_keep_their_own_results_and_events_in_order() -> None:
    """Each member's result is stored under its own dedup key with its own SHA-256 (the
    record's on its own), and the batch's events are its members', member by member."""
    shard = MemoryShard()
    first, second = _published_pair(shard)
    applied = shard.apply(encode_batch([first, second], PUBLISH_BATCH_LEVEL), broker_ms=1_000)
    assert [m.result.status for m in applied.members] == [r.ResultStatus.APPLIED] * 2
    stored = msgspec.msgpack.decode(shard.data[keys.result_key("a/a2")], type=Result)
    assert stored == applied.members[1].result
    assert stored.record_sha256 == MemoryShard().apply(second).result.record_sha256
    kinds = [type(event) for event in applied.events]
    assert kinds == [ObligationClosed, AttemptSettled, ObligationOpened, Admitted]
    again = shard.apply(r.encode(outcome("m1", "a1", r.Outcome.PUBLISHED)), broker_ms=1_000)
    assert again.duplicate  # the member's bytes alone are a re-delivery of it


def test_the_batch_kind_is_gated_by_the_feature_level_both_ways() -> None:
    """Below level 2 a batch is neither written (FeatureLevelError naming the kind) nor
    read (UNSUPPORTED_FEATURE); at level 2, which this build supports, it is both."""
    shard = MemoryShard()
    first, second = _published_pair(shard)
    with pytest.raises(FeatureLevelError, match="PUBLISH_BATCH needs feature level 2"):
        encode_batch([first, second], BASE_LEVEL)
    data = encode_batch([first, second], PUBLISH_BATCH_LEVEL)
    refused = r.decode(data, level=BASE_LEVEL)
    assert isinstance(refused, r.DecodeFailure) and refused.reason == "UNSUPPORTED_FEATURE"
    assert isinstance(r.decode(data, level=SUPPORTED_LEVEL), r.PublishBatch)


@pytest.mark.parametrize("bad", ["schedule", "non-canonical", "empty"])
def test_a_batch_with_a_bad_member_is_rejected_whole(bad: str) -> None:
    """A member that is not a canonical admission or outcome (or no member at all)
    rejects the whole batch under ``reject/<position>``; no member applies."""
    shard = MemoryShard()
    first, second = _published_pair(shard)
    before = dict(shard.data)
    members = {"schedule": [first, r.encode(schedule("m3"))],
               "non-canonical": [first, second.replace(b"\xadfencing_epoch\x01",
                                                       b"\xadfencing_epoch\xcd\x00\x01")],
               "empty": []}[bad]
    data = r.encode(r.PublishBatch(members=tuple(msgspec.Raw(m[3:]) for m in members)))
    applied = shard.apply(data, broker_ms=1_000)
    assert applied.result.status == r.ResultStatus.REJECTED and not applied.members
    assert applied.result.kind == "PUBLISH_BATCH"
    changed = {k for k in shard.data if before.get(k) != shard.data[k]}
    assert changed == {keys.reject_key(applied.result.position), keys.META_APPLIED,
                       keys.META_RECORDS}
    assert member_bytes(msgspec.Raw(first[3:])) == first
