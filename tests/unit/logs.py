"""A Hypothesis strategy for realistic Shard Logs.

It drives a ``MemoryShard`` while drawing operations, the way clients and a scheduler
would: admissions are built from the message's current timeline work, outcomes name
open attempts, some records are re-delivered, some bytes are garbage. The result is a
fixed list of (bytes, broker ms), which tests then apply in other ways and compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import strategies as st

from nereus import records as r
from nereus.adapters.backends.shardlog.protocol import LogRecord, Receipt
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.state import keys
from nereus.state.digest import digest_sorted
from nereus.state.store import ShardStore
from nereus.state.values import Identity
from nereus.testing import MemoryShard
from tests.unit.builders import OWNER, admission, barrier, cancel, op, outcome, reschedule, schedule

MIDS = ["m0", "m1", "m2", "m3", "m4"]
LogEntries = list[tuple[bytes, int]]


def due_sweep(shard: MemoryShard, now_ms: int, mutation_id: str) -> r.Sweep:
    """The SWEEP an owner would append at ``now_ms``: every retain key due by then."""
    due = sorted(key for key in shard.data
                 if key[:1] == keys.RETAIN and keys.split_retain_key(key)[0] <= now_ms)
    return r.Sweep(mutation_id=mutation_id, owner_id=OWNER, fencing_epoch=1,
                   entries=tuple(due[:500]))


@st.composite
def shard_logs(draw: st.DrawFn, max_ops: int = 40, retention: bool = False) -> LogEntries:
    """A log of ``max_ops`` operations at most; with ``retention``, both lanes first get
    a short retention and dedup window (LANE_LIMITS), the shard maybe its own window
    (SHARD_RETENTION: results without a lane window, rejects), and some operations are
    SWEEPs of whatever is due, as an owner appends them."""
    shard = MemoryShard()
    log: LogEntries = []
    now = 1_000
    first = r.encode(barrier())  # the scheduler's owner activates the shard first
    shard.apply(first, broker_ms=now)
    log.append((first, now))
    kinds = ["schedule", "schedule", "cancel", "reschedule", "admit", "admit", "outcome",
             "garbage", "redeliver", "gate", "resolve"]
    if retention:
        kinds += ["sweep", "sweep"]
        for lane in ("local", "slow"):
            data = r.encode(r.LaneLimits(
                lane=lane, retention_ms=draw(st.integers(0, 1_500)),
                dedup_window_ms=draw(st.integers(0, 1_500)), **op(f"retain-{lane}")))
            shard.apply(data, broker_ms=now)
            log.append((data, now))
        if draw(st.booleans()):
            data = r.encode(r.ShardRetention(dedup_window_ms=draw(st.integers(0, 1_500)),
                                             **op("retain-shard")))
            shard.apply(data, broker_ms=now)
            log.append((data, now))
    count = draw(st.integers(min_value=1, max_value=max_ops))
    for n in range(count):
        now += draw(st.integers(min_value=0, max_value=500))
        mid = draw(st.sampled_from(MIDS))
        kind = draw(st.sampled_from(kinds))
        record: bytes | r.Record
        if kind == "schedule":
            record = schedule(mid, now + draw(st.integers(0, 2_000)), cmd=f"s{n}",
                              lane=draw(st.sampled_from(["local", "slow"])))
        elif kind == "cancel":
            record = cancel(mid, cmd=f"c{n}")
        elif kind == "reschedule":
            record = reschedule(mid, now + draw(st.integers(0, 2_000)), cmd=f"r{n}")
        elif kind == "admit":
            message = shard.message(mid)
            if message is None or message.work_digest is None:
                continue
            record = admission(shard, mid, f"a{n}", earliest=max(now, message.action_at_ms))
            now = max(now, message.action_at_ms)
        elif kind == "outcome":
            message = shard.message(mid)
            if message is None or message.open_attempt_id is None:
                continue
            result = draw(st.sampled_from(list(r.Outcome)))
            disposition = r.Disposition.NONE if result != r.Outcome.NOT_PUBLISHED else draw(
                st.sampled_from([r.Disposition.RETRIABLE, r.Disposition.PERMANENT]))
            record = outcome(mid, message.open_attempt_id, result, disposition, oid=f"o{n}")
        elif kind == "resolve":
            message = shard.message(mid)
            if message is None or message.open_attempt_id is None:
                continue
            record = r.AttemptResolve(attempt_id=message.open_attempt_id,
                                      resolution=draw(st.sampled_from(list(r.Resolution))),
                                      evidence="seen by ops", **op(f"k{n}"))
        elif kind == "gate":
            record = r.LaneGate(lane="local", gate=draw(st.sampled_from(list(r.Gate))),
                                **op(f"g{n}"))
        elif kind == "sweep":
            record = due_sweep(shard, now, f"sw{n}")
        elif kind == "garbage":
            record = draw(st.binary(max_size=40))
        else:
            if not log:
                continue
            record = draw(st.sampled_from(log))[0]
        data = record if isinstance(record, bytes) else r.encode(record)
        shard.apply(data, broker_ms=now)
        log.append((data, now))
    return log


class ListLog:
    """A Shard Log held in a list (the contract is tested on real backends elsewhere)."""

    dense = True

    def __init__(self, entries: LogEntries) -> None:
        self.entries = entries

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:  # pragma: no cover - unused
        raise NotImplementedError

    def read(self, from_position: int, max_records: int) -> list[LogRecord]:
        chunk = self.entries[from_position:from_position + max_records]
        return [LogRecord(from_position + i, ms, data) for i, (data, ms) in enumerate(chunk)]

    def end_position(self) -> int:
        return len(self.entries)

    def ack(self, position: int) -> None:
        pass

    def close(self) -> None:
        pass


class LogWriter:
    """What a strategy drawing a log holds: a MemoryShard, the log it applied and the
    broker time of the next record."""

    def __init__(self, now: int = 1_000) -> None:
        self.shard = MemoryShard()
        self.log: LogEntries = []
        self.now = now

    def add(self, record: r.Record | bytes) -> None:
        """Apply ``record`` at ``now`` and append it to the log."""
        data = record if isinstance(record, bytes) else r.encode(record)
        self.shard.apply(data, broker_ms=self.now)
        self.log.append((data, self.now))


IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)


def live_and_restored_digests(entries: LogEntries, *, cut: int, batch: int) -> tuple[str, str]:
    """The digests of ``entries`` applied live into RocksDB in batches of ``batch``, and
    of a copy of that database taken after the records before ``cut`` then caught up: a
    replay from a checkpoint. Tests compare both with a replay from empty in memory."""
    log = ListLog(entries)
    with TemporaryDirectory() as tmp:
        live_path, copy_path = Path(tmp) / "live", Path(tmp) / "checkpoint"
        with ShardStore.open(live_path, identity=IDENTITY, create=True) as live:
            runner = ShardRunner(live, log, batch_records=batch)
            runner.run_until_caught_up(stop_at=cut - 1)
            live.create_checkpoint(copy_path)
            runner.run_until_caught_up()
            live_digest = digest_sorted(live.scan(b"\x00", b"\x80"))
        with ShardStore.open(copy_path, identity=IDENTITY) as restored:
            ShardRunner(restored, log, batch_records=batch).run_until_caught_up()
            restored_digest = digest_sorted(restored.scan(b"\x00", b"\x80"))
    return live_digest, restored_digest


def replayed_in_agreement(entries: LogEntries, data: st.DataObject) -> MemoryShard:
    """``entries`` replayed from empty in memory, once its digest is shown equal to the
    live and the restored ones (``live_and_restored_digests``, at a drawn cut and batch)."""
    cut = data.draw(st.integers(min_value=0, max_value=len(entries)))
    batch = data.draw(st.integers(min_value=1, max_value=9))
    live_digest, restored_digest = live_and_restored_digests(entries, cut=cut, batch=batch)
    shard = MemoryShard(identity=IDENTITY)
    for raw, ms in entries:
        shard.apply(raw, broker_ms=ms)
    assert live_digest == restored_digest == shard.digest()
    return shard
