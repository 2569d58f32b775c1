"""The owner's side of retention catch-up (``engine/shard/retention_backfill.py``): a bounded look
per turn, one RETAIN_BACKFILL on its way at a time, a cursor that survives a restart, a
lost record looked at again, and a new catch-up scanned from the start."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from nereus import records as r
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.engine.runtime.event_log import null_event_log
from nereus.engine.shard.outbox import Outbox
from nereus.engine.shard.retention_backfill import BackfillTrigger
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from tests.fake_clock import FakeClock
from tests.unit.builders import OWNER, barrier, cancel, op, schedule

IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
HOUR_MS = 3_600_000


class Owner:
    """A shard with twelve messages cancelled before ``local`` first had a retention, and
    the parts of an owner loop the trigger needs."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.log = FileShardLog(tmp_path / "log", clock_ms=self.clock.wall_ms)
        self.store = ShardStore.open(tmp_path / "db", identity=IDENTITY, create=True)
        self.runner = ShardRunner(self.store, self.log)
        records: list[r.Record] = [barrier()]
        for n in range(12):
            records += [schedule(f"m{n:02}", self.clock.wall_ms() + HOUR_MS), cancel(f"m{n:02}")]
        records.append(self.first_retention("local"))
        self.append(records)
        self.outbox = Outbox(ShardId("default", 0), self.log, time=self.clock,
                             events=null_event_log, wake=threading.Event())
        self.ids = (f"bf{n}" for n in itertools.count())

    def first_retention(self, lane: str) -> r.LaneLimits:
        return r.LaneLimits(lane=lane, retention_ms=HOUR_MS, dedup_window_ms=HOUR_MS,
                            catch_up=True, **op(f"limits-{lane}"))

    def append(self, records: list[r.Record]) -> None:
        self.log.append([r.encode(record) for record in records])
        self.runner.run_until_caught_up()

    def trigger(self) -> BackfillTrigger:
        return BackfillTrigger(self.store, self.outbox, time=self.clock, owner_id=OWNER,
                               new_id=lambda: next(self.ids), scan_keys=5)

    def appended(self) -> list[tuple[str, ...]]:
        """The ids each RETAIN_BACKFILL the outbox appended names (messages, result keys,
        ``reject@<position>``, then payload stages); applies them."""
        start = self.log.end_position()
        self.outbox.flush()
        self.runner.run_until_caught_up()
        named = []
        for item in self.log.read(start, 100):
            record = r.decode(item.payload)
            assert isinstance(record, r.RetainBackfill)
            stages = record.payload_ids if isinstance(record.payload_ids, tuple) else ()
            results = record.result_keys if isinstance(record.result_keys, tuple) else ()
            rejects = tuple(f"reject@{position}" for position in record.reject_positions) \
                if isinstance(record.reject_positions, tuple) else ()
            named.append(record.delay_message_ids + results + rejects + stages)
        return named

    def looks(self, trigger: BackfillTrigger, count: int) -> list[tuple[str, ...]]:
        """``count`` turns a second apart: the trigger looks, and what it appended is
        applied; the ids each record named."""
        named = []
        for _ in range(count):
            self.clock.advance(1.0)
            trigger.maybe_backfill(epoch=1)
            named += self.appended()
        return named

    def retained(self) -> set[str]:
        return {keys.split_retain_key(key)[2] for key, _ in self.store.scan_prefix(keys.RETAIN)
                if key[9:10] == keys.RETAIN_MESSAGE}


def test_the_owner_catches_up_five_messages_a_look_one_record_at_a_time(
        tmp_path: Path) -> None:
    """Twelve eligible messages, five looked at a turn: records of 5, 5 and 2 ids, each only
    once the one before is applied and a second has passed; then nothing more, also after
    a restart (the cursor is kept)."""
    owner = Owner(tmp_path)
    trigger = owner.trigger()
    assert trigger.maybe_backfill(epoch=1)
    assert not trigger.maybe_backfill(epoch=1)  # not a second later yet
    owner.clock.advance(1.0)
    assert not trigger.maybe_backfill(epoch=1)  # the first one is not applied yet
    named = owner.appended()
    named += owner.looks(trigger, 3)
    assert [len(ids) for ids in named] == [5, 5, 2]
    assert owner.retained() == {f"m{n:02}" for n in range(12)}
    owner.clock.advance(1.0)
    assert not trigger.maybe_backfill(epoch=1)
    cursor = trigger.cursor()
    assert cursor is not None and cursor.after is None
    assert not owner.trigger().maybe_backfill(epoch=1)  # a restart does not scan again
    owner.store.close()


def test_a_record_not_applied_in_time_is_looked_at_again_and_a_new_catch_up_starts_over(
        tmp_path: Path) -> None:
    """A RETAIN_BACKFILL still not applied after ``give_up_s`` (its append lost, or late):
    the same messages are named again, and the late one, applied after all, changes
    nothing more. Lane ``slow`` first getting a retention later: the scan starts over."""
    owner = Owner(tmp_path)
    trigger = owner.trigger()
    assert trigger.maybe_backfill(epoch=1)
    owner.clock.advance(61.0)
    assert trigger.maybe_backfill(epoch=1)
    first, again = owner.appended()
    assert first == again and len(first) == 5
    owner.append([schedule("s1", owner.clock.wall_ms() + HOUR_MS, lane="slow"), cancel("s1"),
                  owner.first_retention("slow")])
    owner.looks(trigger, 6)
    assert owner.retained() == {f"m{n:02}" for n in range(12)} | {"s1"}
    owner.store.close()


def test_a_retention_given_back_after_0_is_scanned_from_the_start(tmp_path: Path) -> None:
    """Once the first catch-up is finished, ``local``'s retention set to 0 and then given
    back (LANE_LIMITS asking ``catch_up_kept``): the message cancelled while it was 0 is
    named by a new scan from the start, and nothing the first catch-up covered is named
    twice."""
    owner = Owner(tmp_path)
    trigger = owner.trigger()
    named = owner.looks(trigger, 4)
    assert sorted(sum(named, ())) == [f"m{n:02}" for n in range(12)]

    def limits(retention_ms: int, n: int) -> r.LaneLimits:
        return r.LaneLimits(lane="local", retention_ms=retention_ms, dedup_window_ms=HOUR_MS,
                            catch_up=True, catch_up_kept=True, **op(f"limits-again-{n}"))

    owner.append([limits(0, 1), schedule("k1", owner.clock.wall_ms() + HOUR_MS),
                  cancel("k1"), limits(HOUR_MS, 2)])
    later = owner.looks(trigger, 4)
    assert later == [("k1",)]
    assert owner.retained() == {f"m{n:02}" for n in range(12)} | {"k1"}
    owner.store.close()


def test_stages_from_before_the_shards_window_are_named_after_the_messages(
        tmp_path: Path) -> None:
    """Three payload stages reserved with no shard window, then a SHARD_RETENTION giving one
    (asking to catch up): the scan goes through the ``msg`` family (the twelve messages'
    catch-up) and on into the ``payload`` family, five keys a look, so its last look names
    two messages and the three stages in one record; each stage gets its ``p`` entry."""
    owner = Owner(tmp_path)
    owner.append([r.PayloadReserve(command_id=f"r{n}", payload_id=f"p{n}", size_bytes=10,
                                   sha256="c" * 64, expires_at_ms=owner.clock.wall_ms() + HOUR_MS)
                  for n in range(3)])
    owner.append([r.ShardRetention(dedup_window_ms=HOUR_MS, catch_up=True, **op("window"))])
    trigger = owner.trigger()
    named = owner.looks(trigger, 8)
    assert sorted(sum(named, ())) == sorted([f"m{n:02}" for n in range(12)] +
                                            ["p0", "p1", "p2"])
    assert named[-1] == ("m10", "m11", "p0", "p1", "p2")  # one look, over both families
    staged = {keys.split_retain_key(key)[2] for key, _ in owner.store.scan_prefix(keys.RETAIN)
              if key[9:10] == keys.RETAIN_PAYLOAD}
    assert staged == {"p0", "p1", "p2"}
    owner.store.close()



def test_results_and_rejects_from_before_the_shards_window_are_named_in_key_order(
        tmp_path: Path) -> None:
    """Three query barriers and two garbage records with no shard window, then a
    SHARD_RETENTION giving one (asking to catch up results): after the messages the scan
    names, from the ``result`` family, the results of records that never have a lane window
    (the barriers, the activation, the lane's limits) but not those of the SCHEDULEs and
    CANCELs, then the two rejects; each gets its entry, and the scan then finishes."""
    owner = Owner(tmp_path)
    owner.append([r.QueryBarrier(command_id=f"q{n}") for n in range(3)])
    start = owner.log.end_position()
    owner.log.append([b"garbage-1", b"garbage-2"])
    owner.runner.run_until_caught_up()
    owner.append([r.ShardRetention(dedup_window_ms=HOUR_MS, catch_up=True,
                                   catch_up_results=True, **op("window"))])
    trigger = owner.trigger()
    named = sum(owner.looks(trigger, 12), ())
    messages = [f"m{n:02}" for n in range(12)]
    results = [name for name in named if "/" in name]
    rejects = [f"reject@{start}", f"reject@{start + 1}"]
    assert list(named) == messages + results + rejects
    assert sorted(results) == sorted(["b/" + barrier().barrier_id, "m/limits-local",
                                      "c/q0", "c/q1", "c/q2"])
    entries = {keys.split_retain_key(key)[2] for key, _ in owner.store.scan_prefix(keys.RETAIN)}
    assert set(results) | {str(start), str(start + 1)} <= entries
    cursor = trigger.cursor()
    assert cursor is not None and cursor.after is None  # finished
    owner.store.close()
