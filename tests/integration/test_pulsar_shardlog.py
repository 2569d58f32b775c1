"""The Pulsar Shard Log: the backend contract against a real broker, plus what only Pulsar
can get wrong (sparse positions across ledgers, the topic's shape, the ack cursor).

The broker is Pulsar standalone from ``scripts/services up pulsar`` (session fixture in
``tests/integration/pulsar_service.py``); without it these tests fail, never skip. Each
test gets its own partitioned topic, named from its ``tmp_path``, and deletes it after.

Pulsar positions are packed MessageIds, ``(ledger << 32) | entry``: increasing but not
consecutive (``dense = False``). The contract tests that count positions (0, 1, 2, ...)
are restated below for a sparse log, each keeping its promise: receipts increase in
append order, ``end_position`` lies past every record, reading from any record's position
returns exactly the suffix from that record.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from nereus.adapters.backends.pulsar.pulsar_client import (
    TopicMisconfigured,
    admin_request,
    admin_topic_path,
)
from nereus.adapters.backends.pulsar.pulsar_command_topic import ensure_partitioned_topic
from nereus.adapters.backends.pulsar.pulsar_log import PulsarShardLog
from nereus.adapters.backends.pulsar.pulsar_positions import (
    PositionOutOfRange,
    decode_position,
    encode_position,
    end_after,
)
from nereus.adapters.backends.shardlog.protocol import Receipt, ShardLog
from nereus.adapters.offline.log_replay import store_digest
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.errors import ExitCode, ServiceUnreachable
from nereus.records import QueryBarrier, encode
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from tests.integration.pulsar_service import (
    PulsarEndpoint,
    PulsarService,
    closed_port,
    pulsar_service,
    unique_topic,
)
from tests.integration.shardlog_contract import MakeLog, ShardLogContract, payloads, read_all
from tests.polling import wait_until

__all__ = ["pulsar_service"]  # the session fixture, imported so pytest finds it here

PARTITIONS = 2
PARTITION = 1  # not 0, so the partition number is really used
SESSION_SALT = uuid.uuid4().hex[:8]  # a --basetemp reused across runs still gets new topics


def topic_for(tmp_path: Path) -> str:
    """The test's topic: the same ``tmp_path`` always gives the same topic in a session."""
    digest = hashlib.blake2b(f"{SESSION_SALT}:{tmp_path}".encode(), digest_size=6).hexdigest()
    return f"nereus-test-log-{digest}"


def unload(endpoint: PulsarEndpoint, topic: str) -> None:
    """Unload a partition from the broker: its open ledger is closed, the next write goes to
    a new ledger (a gap in the positions)."""
    status, body = admin_request(endpoint.admin_url, "PUT",
                                 f"admin/v2/{admin_topic_path(topic)}/unload", timeout_s=30)
    assert status in (200, 204), body


def barriers(prefix: str, count: int) -> list[bytes]:
    return [encode(QueryBarrier(command_id=f"{prefix}-{i}")) for i in range(count)]


class TestPulsarShardLog(ShardLogContract):
    """The Pulsar log keeps the Shard Log contract (restated for sparse positions)."""

    @pytest.fixture(autouse=True)
    def _topics(self, pulsar_service: PulsarService) -> Iterator[None]:
        """Hand the broker to ``make_log``; delete this test's topic afterwards."""
        self.service = pulsar_service
        self.topics: set[str] = set()
        yield
        endpoint = self.service.require()
        for topic in self.topics:
            endpoint.delete_topic(topic, partitioned=True)

    def make_log(self, tmp_path: Path) -> PulsarShardLog:
        endpoint = self.service.require()
        topic = topic_for(tmp_path)
        if topic not in self.topics:
            ensure_partitioned_topic(endpoint.admin_url, topic, PARTITIONS, timeout_s=30)
            self.topics.add(topic)
        return PulsarShardLog(endpoint.service_url, topic, PARTITION,
                              admin_url=endpoint.admin_url, timeout_s=15)

    # restated for sparse positions ----------------------------------------------------------
    def test_append_returns_one_receipt_per_payload_with_consecutive_positions(
        self, log: ShardLog
    ) -> None:
        """append gives one receipt per payload; positions increase from end_position().

        Sparse log: positions are MessageIds, so "consecutive" becomes "strictly
        increasing, none below the end position read before the append"."""
        start = log.end_position()
        receipts = log.append(payloads("a", 5))
        positions = [r.position for r in receipts]
        assert all(isinstance(r, Receipt) for r in receipts)
        assert len(positions) == 5 and positions == sorted(set(positions))
        assert positions[0] >= start
        more = [r.position for r in log.append(payloads("b", 3))]
        assert len(more) == 3 and more == sorted(set(more)) and more[0] > positions[-1]

    def test_empty_append_returns_no_receipts(self, log: ShardLog) -> None:
        """Appending nothing returns [] and leaves the log as it was.

        Sparse log: the end after one record is that record's position + 1, not 1."""
        assert log.append([]) == []
        (receipt,) = log.append([b"one"])
        assert log.append([]) == []
        assert log.end_position() == receipt.position + 1
        assert [r.payload for r in read_all(log)] == [b"one"]

    def test_end_position_follows_appends(self, log: ShardLog) -> None:
        """end_position is just past the last record appended.

        Sparse log: that is the last receipt's position + 1, not the number appended."""
        assert log.end_position() == 0
        first = log.append(payloads("a", 4))
        assert log.end_position() == first[-1].position + 1
        receipts = log.append(payloads("b", 6))
        assert log.end_position() == receipts[-1].position + 1 > first[-1].position + 1

    def test_read_from_zero_returns_everything_in_order(self, log: ShardLog) -> None:
        """read(0) gives every record in order, with the receipts' positions and times.

        Sparse log: the positions are the receipts', not 0..n-1."""
        sent = payloads("a", 7) + payloads("b", 1) + payloads("c", 12)
        receipts = log.append(sent[:7]) + log.append(sent[7:8]) + log.append(sent[8:])
        records = read_all(log)
        assert [r.payload for r in records] == sent
        assert [(r.position, r.broker_ms) for r in records] == [
            (r.position, r.broker_ms) for r in receipts
        ]

    def test_read_from_a_middle_position(self, log: ShardLog) -> None:
        """read(p) starts exactly at the record at p, for every record's position p.

        Sparse log: p ranges over the receipts' positions instead of 0..n-1."""
        sent = payloads("m", 15)
        receipts = log.append(sent[:6]) + log.append(sent[6:])
        positions = [r.position for r in receipts]
        for start, position in enumerate(positions):
            records = read_all(log, position, batch=4)
            assert [r.position for r in records] == positions[start:]
            assert [r.payload for r in records] == sent[start:]

    def test_read_respects_max_records(self, log: ShardLog) -> None:
        """read never returns more than max_records, and never skips ahead.

        Sparse log: starts at the third record's position and compares with receipts."""
        receipts = log.append(payloads("r", 10))
        positions = [r.position for r in receipts]
        for limit in (1, 3, 10, 50):
            got = log.read(positions[2], limit)
            assert 0 < len(got) <= limit
            assert [r.position for r in got] == positions[2:2 + len(got)]
        assert read_all(log, 0, batch=1) == read_all(log)

    def test_read_at_or_past_the_end_returns_nothing(self, log: ShardLog) -> None:
        """Reading from end_position() (or beyond) returns [] rather than failing.

        Sparse log: the end is a MessageId, so "3" and "100" become end and end + 100."""
        log.append(payloads("e", 3))
        end = log.end_position()
        assert log.read(end, 10) == []
        assert log.read(end + 100, 10) == []

    def test_reader_sees_records_appended_after_it_caught_up(self, log: ShardLog) -> None:
        """A reader that reached the end picks up later appends from the same position.

        Sparse log: "the same position" is the end position, not 3."""
        log.append(payloads("a", 3))
        assert len(read_all(log)) == 3
        end = log.end_position()
        assert log.read(end, 10) == []
        log.append(payloads("b", 2))
        assert [r.payload for r in log.read(end, 10)] == payloads("b", 2)

    def test_second_log_object_sees_the_records(self, open_log: MakeLog) -> None:
        """A log opened later on the same partition reads everything the first appended.

        Sparse log: its end is the last receipt + 1, not 9."""
        first = open_log()
        sent = payloads("a", 9)
        receipts = first.append(sent)
        second = open_log()
        assert second.end_position() == receipts[-1].position + 1
        records = read_all(second)
        assert [r.payload for r in records] == sent
        assert [r.broker_ms for r in records] == [r.broker_ms for r in receipts]

    def test_appends_from_two_log_objects_interleave_without_gaps(
        self, open_log: MakeLog
    ) -> None:
        """Two objects appending in turn share one position sequence: no reuse, no loss.

        Sparse log: "no gap" becomes "strictly increasing, and both read exactly the
        positions the receipts gave"."""
        first, second = open_log(), open_log()
        got = []
        for i in range(6):
            writer = first if i % 2 == 0 else second
            got += writer.append([f"w{i}-{j}".encode() for j in range(i + 1)])
        positions = [r.position for r in got]
        assert positions == sorted(set(positions))
        for log in (first, second):
            assert log.end_position() == positions[-1] + 1
            assert [r.position for r in read_all(log)] == positions

    def test_time_stays_monotonic_after_reopen(self, open_log: MakeLog) -> None:
        """A log re-opened on a partition never stamps earlier than what is there.

        Sparse log: the first new record comes after the old ones, not at position 3."""
        before = open_log().append(payloads("a", 3))
        after = open_log().append(payloads("b", 3))
        assert after[0].position > before[-1].position
        assert after[0].broker_ms >= before[-1].broker_ms

    # what only Pulsar can get wrong ---------------------------------------------------------
    def test_positions_jump_across_a_ledger_rollover(self, open_log: MakeLog) -> None:
        """After the broker rolls the partition to a new ledger, positions jump (a gap) but
        still increase; reads from before, inside and after the gap give the right suffix."""
        log = open_log()
        assert isinstance(log, PulsarShardLog)
        before = log.append(payloads("old", 4))
        unload(self.service.require(), log.partition_topic)
        end_between = log.end_position()
        assert end_between == before[-1].position + 1  # the new ledger is still empty
        after = log.append(payloads("new", 3))
        old_ledger, _ = decode_position(before[-1].position)
        new_ledger, new_entry = decode_position(after[0].position)
        assert new_ledger > old_ledger and new_entry == 0
        positions = [r.position for r in before + after]
        assert [r.position for r in read_all(log)] == positions
        assert [r.position for r in read_all(log, before[2].position)] == positions[2:]
        assert [r.position for r in read_all(log, end_between)] == positions[4:]
        assert [r.position for r in read_all(log, after[0].position - 1)] == positions[4:]
        assert log.end_position() == after[-1].position + 1
        again = open_log()  # a new object on the same partition sees the same positions
        assert [r.position for r in read_all(again)] == positions

    def test_runner_applies_a_pulsar_log_across_a_rollover(
        self, open_log: MakeLog, tmp_path: Path
    ) -> None:
        """The shard runner applies the sparse log, resumes after a restart across a new
        ledger, and ends with the same state as a replay from empty."""
        log = open_log()
        assert isinstance(log, PulsarShardLog)
        identity = Identity(route="default", partition=PARTITION,
                            schema_version=keys.SCHEMA_VERSION)
        first = log.append(barriers("a", 5))
        with ShardStore.open(tmp_path / "live", identity=identity, create=True) as store:
            assert ShardRunner(store, log, batch_records=2).run_until_caught_up() == 5
            assert store.applied_position() == first[-1].position
        unload(self.service.require(), log.partition_topic)
        second = log.append(barriers("b", 4))
        with ShardStore.open(tmp_path / "live", identity=identity) as store:
            assert ShardRunner(store, log, batch_records=3).run_until_caught_up() == 4
            assert store.applied_position() == second[-1].position
            live = store_digest(store)
        with ShardStore.open(tmp_path / "replay", identity=identity, create=True) as store:
            assert ShardRunner(store, open_log()).run_until_caught_up() == 9
            assert store_digest(store) == live

    def test_ack_moves_the_subscription_cursor(self, open_log: MakeLog) -> None:
        """ack(p) moves the ``nereus-<partition>`` cursor: the backlog is what follows p, and
        an ack from a second log object (a standby consumer) counts too."""
        first, second = open_log(), open_log()
        assert isinstance(first, PulsarShardLog) and isinstance(second, PulsarShardLog)
        receipts = first.append(payloads("k", 6))
        first.ack(receipts[1].position)
        # acks are grouped by the client for 100 ms
        wait_until("a backlog of 4", lambda: first.backlog() == 4, 10, interval_s=0.1,
                   seen=first.backlog)
        second.ack(receipts[4].position)
        wait_until("a backlog of 1", lambda: first.backlog() == 1, 10, interval_s=0.1,
                   seen=first.backlog)
        first.ack(receipts[0].position)  # behind the cursor: nothing changes
        time.sleep(0.3)
        assert first.backlog() == 1 and first.ack_failures == 0

    def test_a_partition_the_topic_lacks_is_refused(self) -> None:
        """Opening partition 5 of a 2-partition topic fails, naming the topic's shape."""
        endpoint = self.service.require()
        topic = unique_topic("nereus-test-log")
        ensure_partitioned_topic(endpoint.admin_url, topic, PARTITIONS)
        self.topics.add(topic)
        with pytest.raises(TopicMisconfigured, match="2 partition"):
            PulsarShardLog(endpoint.service_url, topic, 5, admin_url=endpoint.admin_url,
                           timeout_s=10)


# the Command Topic ------------------------------------------------------------------------
def test_ensure_partitioned_topic_creates_once_with_infinite_retention(
    pulsar_service: PulsarService,
) -> None:
    """The topic is created with the partitions and infinite retention; a second call finds
    it and creates nothing; more partitions than it has, or a plain topic, is refused."""
    endpoint = pulsar_service.require()
    topic = unique_topic("nereus-test-cmd")
    plain = unique_topic("nereus-test-plain")
    try:
        assert ensure_partitioned_topic(endpoint.admin_url, topic, 3) is True
        assert ensure_partitioned_topic(endpoint.admin_url, topic, 3) is False
        assert ensure_partitioned_topic(endpoint.admin_url, topic, 2) is False
        status, body = admin_request(
            endpoint.admin_url, "GET",
            f"admin/v2/{admin_topic_path(topic)}/retention?applied=true", timeout_s=10)
        assert status == 200
        assert body["retentionTimeInMinutes"] == -1 and body["retentionSizeInMB"] == -1
        with pytest.raises(TopicMisconfigured, match="has 3 partition"):
            ensure_partitioned_topic(endpoint.admin_url, topic, 4)
        status, _ = admin_request(endpoint.admin_url, "PUT",
                                  f"admin/v2/{admin_topic_path(plain)}", timeout_s=10)
        assert status in (200, 204)
        with pytest.raises(TopicMisconfigured, match="not partitioned"):
            ensure_partitioned_topic(endpoint.admin_url, plain, 1)
    finally:
        endpoint.delete_topic(topic, partitioned=True)
        endpoint.delete_topic(plain, partitioned=False)


# unreachable ------------------------------------------------------------------------------
def test_unreachable_broker_is_service_unreachable_within_the_timeout() -> None:
    """No broker at the address: opening the log raises ServiceUnreachable (exit 5) within
    its timeout, naming the address."""
    url = f"pulsar://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(ServiceUnreachable, match=r"127\.0\.0\.1") as caught:
        PulsarShardLog(url, "nereus-unreachable", 0, timeout_s=2)
    assert time.monotonic() - started < 4.5
    assert caught.value.exit_code == ExitCode.SERVICE_UNREACHABLE


def test_unreachable_admin_api_is_service_unreachable() -> None:
    """No admin API at the address: creating the Command Topic raises ServiceUnreachable."""
    admin = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ServiceUnreachable, match="admin API"):
        ensure_partitioned_topic(admin, "nereus-unreachable", 2, timeout_s=2)


def test_a_black_holed_address_still_answers_within_the_timeout() -> None:
    """An address that drops packets (the client alone takes 8-12 s to give up) is
    reported as ServiceUnreachable within the timeout, by the owned deadline."""
    started = time.monotonic()
    with pytest.raises(ServiceUnreachable):
        PulsarShardLog("pulsar://10.255.255.1:6650", "nereus-unreachable", 0, timeout_s=2)
    assert time.monotonic() - started < 4.5 + 5  # deadline + the bounded join of the opener
    assert not [t for t in threading.enumerate() if t.name.startswith("pulsar-open")]


# the encoding -----------------------------------------------------------------------------
def test_position_encoding_round_trips_and_orders_like_message_ids() -> None:
    """(ledger, entry) <-> (ledger << 32) | entry, ordered as MessageIds are; ids outside
    the encoding raise instead of wrapping."""
    ids = [(0, 0), (0, 1), (0, 2**32 - 1), (1, 0), (7, 3), (2**31 - 1, 2**32 - 1)]
    positions = [encode_position(*i) for i in ids]
    assert positions == sorted(positions)
    assert [decode_position(p) for p in positions] == ids
    assert positions[-1] < 2**63
    for bad in ((2**31, 0), (0, 2**32), (-1, 0), (0, -1)):
        with pytest.raises(PositionOutOfRange):
            encode_position(*bad)
    assert end_after(-1, -1) == 0
    assert end_after(5, -1) == encode_position(5, 0)
    assert end_after(5, 9) == encode_position(5, 9) + 1
