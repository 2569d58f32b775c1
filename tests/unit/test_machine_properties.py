"""Property tests of the state machine: determinism, restart, bad bytes, one winner."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.machine import Reason
from nereus.records import MessageState, Record, ResultStatus
from nereus.state import keys
from nereus.state.digest import digest_sorted
from nereus.state.store import ShardStore
from nereus.state.values import Identity, decode_int
from nereus.testing import MemoryShard
from tests.unit.builders import admission, cancel, schedule
from tests.unit.logs import ListLog, LogEntries, shard_logs

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


def one_pass(entries: LogEntries) -> MemoryShard:
    shard = MemoryShard(identity=IDENTITY)
    for data, ms in entries:
        shard.apply(data, broker_ms=ms)
    return shard


@given(shard_logs())
def test_applying_the_same_log_twice_gives_the_same_digest(entries: LogEntries) -> None:
    """apply is deterministic: two passes from empty produce identical state."""
    first, second = one_pass(entries), one_pass(entries)
    assert first.digest() == second.digest()
    assert first.data == second.data


@settings(max_examples=25, deadline=None)
@given(shard_logs(), st.data())
def test_prefix_restart_rest_equals_one_pass(entries: LogEntries, data: st.DataObject) -> None:
    """Apply a prefix into RocksDB, close, reopen, apply the rest: same digest as one pass."""
    cut = data.draw(st.integers(min_value=0, max_value=len(entries)))
    batch = data.draw(st.integers(min_value=1, max_value=7))
    log = ListLog(entries)
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "db"
        with ShardStore.open(path, identity=IDENTITY, create=True) as store:
            ShardRunner(store, log, batch_records=batch).run_until_caught_up(stop_at=cut - 1)
        with ShardStore.open(path, identity=IDENTITY) as store:
            runner = ShardRunner(store, log, batch_records=batch)
            assert runner.next_position == cut
            runner.run_until_caught_up()
            assert store.applied_position() == (len(entries) - 1 if entries else None)
            records = store.get(keys.META_RECORDS)
            assert (decode_int(records) if records else 0) == len(entries)
            digest = digest_sorted(store.scan(b"\x00", b"\x80"))
    assert digest == one_pass(entries).digest()


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_and_leave_a_rejection(data: bytes) -> None:
    """Any bytes as a record: no exception, a result for that position, the shard moves on."""
    shard = MemoryShard()
    applied = shard.apply(data)
    if applied.record is None:
        assert applied.result.status == ResultStatus.REJECTED
        assert shard.get(keys.reject_key(0)) is not None
    assert shard.get(keys.META_APPLIED) is not None
    assert shard.result(schedule("after", cmd="after")).status == ResultStatus.APPLIED


@given(st.permutations(["cancel", "admit_a", "admit_b"]))
def test_cancel_and_admissions_have_exactly_one_winner(order: list[str]) -> None:
    """Whatever order CANCEL and two admissions arrive in, exactly one wins; all are logged."""
    shard = MemoryShard()
    shard.apply(schedule("m1", 1_000))
    records: dict[str, Record] = {
        "cancel": cancel("m1"),
        "admit_a": admission(shard, "m1", "a"),
        "admit_b": admission(shard, "m1", "b"),
    }
    results = {name: shard.result(records[name], broker_ms=1_000) for name in order}
    winners = [name for name, result in results.items() if result.status == ResultStatus.APPLIED]
    assert len(winners) == 1
    for name, result in results.items():
        if name != winners[0]:
            assert result.status in (ResultStatus.STALE, ResultStatus.REJECTED)
            assert result.reason in (Reason.STALE_MESSAGE_STATE, Reason.ALREADY_ADMITTED)
    message = shard.message("m1")
    assert message is not None
    expected = MessageState.CANCELLED if winners[0] == "cancel" else MessageState.PUBLISHING
    assert message.state == expected
    attempts = shard.keys_with_prefix(keys.ATTEMPT)
    assert len(attempts) == (0 if winners[0] == "cancel" else 1)
