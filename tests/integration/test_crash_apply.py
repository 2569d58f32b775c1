"""Crash safety of the shard runner: every record is applied exactly once, whatever dies.

State, results, the applied position and the records-applied counter commit in one synced
WriteBatch (STYLE, habit 4). So a runner SIGKILLed at any instant (while reading, while
applying, inside the commit, between commit and ack, while RocksDB recovers) and started
again must end with exactly the database a clean single pass builds: same applied
position, a records counter equal to the log's length, and the same state digest.
"""

from __future__ import annotations

import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.offline.log_replay import replay_empty, store_digest
from nereus.adapters.offline.shard_runner import ShardRunner
from nereus.client import RouteRef, prepare_cancel, prepare_reschedule, prepare_schedule
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Identity, decode_int

WORKER = Path(__file__).with_name("crash_worker.py")
SHARD = ShardId("default", 0)
IDENTITY = Identity(route="default", partition=0, schema_version=keys.SCHEMA_VERSION)
ROUTE = RouteRef("default", 1)  # one partition: every message lands on default/0
LINE_DEADLINE_S = 30.0
BATCH_RECORDS = 200
KILLS = 12
T0_MS = 1_900_000_000_000


# the log ---------------------------------------------------------------------------------
def build_log(directory: Path, count: int, *, seed: int) -> FileShardLog:
    """A log of ``count`` records: mostly SCHEDULE, with CANCEL and RESCHEDULE of earlier
    messages, same-bytes re-deliveries, same-id-different-bytes conflicts and garbage."""
    rng = random.Random(seed)
    log = FileShardLog(directory, segment_bytes=512 << 10)
    sent: list[bytes] = []
    scheduled: list[int] = []
    batch: list[bytes] = []
    for n in range(count):
        roll = rng.random()
        if roll < 0.70 or not scheduled:
            scheduled.append(n)
            data = prepare_schedule(
                ROUTE, command_id=f"s{n}", delay_message_id=f"m{n}", lane="local",
                deliver_at_ms=T0_MS + rng.randrange(10**7), key=f"k{n % 97}",
                headers={"n": str(n)}, payload=rng.randbytes(rng.randrange(64)),
            ).data
        elif roll < 0.80:
            data = prepare_cancel(
                ROUTE, command_id=f"c{n}", delay_message_id=f"m{rng.choice(scheduled)}"
            ).data
        elif roll < 0.88:
            data = prepare_reschedule(
                ROUTE, command_id=f"r{n}", delay_message_id=f"m{rng.choice(scheduled)}",
                deliver_at_ms=T0_MS + rng.randrange(10**7),
            ).data
        elif roll < 0.97 and sent:
            data = rng.choice(sent)  # a client retry: the same prepared bytes again
        elif roll < 0.985:
            first = rng.choice(scheduled)  # the same command id with different bytes
            data = prepare_schedule(
                ROUTE, command_id=f"s{first}", delay_message_id=f"m{first}", lane="local",
                deliver_at_ms=T0_MS - 1,
            ).data
        else:
            data = rng.choice([b"", b"\x00", b"not a record", rng.randbytes(rng.randrange(80))])
        sent.append(data)
        batch.append(data)
        if len(batch) == 1_000:
            log.append(batch)
            batch = []
    log.append(batch)
    assert log.end_position() == count
    return log


@dataclass(frozen=True)
class BuiltLog:
    directory: Path
    records: int
    digest: str  # of a clean single pass from position 0


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory) -> BuiltLog:
    """20,000 records over several segments, and the digest of one clean pass over them."""
    root = tmp_path_factory.mktemp("long")
    log = build_log(root / "log", 20_000, seed=7)
    assert len(log.segments()) > 3
    report = replay_empty(log, SHARD, root / "clean")
    assert report.applied_position == 19_999
    log.close()
    return BuiltLog(root / "log", 20_000, report.digest)


@pytest.fixture(scope="module")
def short_log(tmp_path_factory: pytest.TempPathFactory) -> BuiltLog:
    root = tmp_path_factory.mktemp("short")
    log = build_log(root / "log", 3_000, seed=11)
    report = replay_empty(log, SHARD, root / "clean")
    log.close()
    return BuiltLog(root / "log", 3_000, report.digest)


def records_applied(store: ShardStore) -> int:
    raw = store.get(keys.META_RECORDS)
    return 0 if raw is None else decode_int(raw)


# the worker ------------------------------------------------------------------------------
class Worker:
    """One run of crash_worker.py, read line by line, each line waited for with a deadline."""

    def __init__(self, log_dir: Path, db_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(log_dir), str(db_dir), str(BATCH_RECORDS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
        )

    def line(self) -> list[str] | None:
        """The next line the worker printed, split into words; None once it exited."""
        stdout = self.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], LINE_DEADLINE_S)
        assert ready, f"the worker printed nothing for {LINE_DEADLINE_S} s"
        raw = stdout.readline()
        return raw.decode().split() if raw else None

    def kill(self) -> int:
        """SIGKILL the worker (if it still runs) and return its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=LINE_DEADLINE_S)

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Every worker started by the test; any still running at teardown is killed."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.kill()
        for stream in (worker.proc.stdout, worker.proc.stderr):
            if stream is not None:
                stream.close()


def test_sigkill_at_random_points_applies_every_record_exactly_once(
    long_log: BuiltLog, tmp_path: Path, workers: list[Worker]
) -> None:
    """A runner SIGKILLed again and again at random points, then let finish, leaves the
    applied position at the end, the records counter equal to the log length and the
    state digest equal to a clean single pass."""
    rng = random.Random(20_240_611)
    db = tmp_path / "db"
    restarts: list[tuple[int, int]] = []  # (applied position, records applied) at each open
    kills = 0
    while kills < KILLS:
        worker = Worker(long_log.directory, db)
        workers.append(worker)
        if rng.random() < 0.2:
            # die while opening: during RocksDB recovery or the identity check
            time.sleep(rng.uniform(0, 0.15))
        else:
            opened = worker.line()
            assert opened is not None and opened[0] == "open", worker.stderr()
            restarts.append((int(opened[1]), int(opened[2])))
            for _ in range(rng.randint(0, 6)):
                event = worker.line()
                assert event is not None and event[0] == "batch", (event, worker.stderr())
            # land somewhere inside the next batch: reading, applying, committing, acking
            time.sleep(rng.uniform(0, 0.008))
        status = worker.kill()
        assert status == -signal.SIGKILL, (
            f"the worker exited ({status}) before kill {kills + 1}: {worker.stderr()}"
        )
        kills += 1

    final = Worker(long_log.directory, db)
    workers.append(final)
    lines = []
    while (line := final.line()) is not None:
        lines.append(line)
    assert final.proc.wait(timeout=LINE_DEADLINE_S) == 0, final.stderr()
    assert lines[0][0] == "open" and lines[-1][0] == "done"
    restarts.append((int(lines[0][1]), int(lines[0][2])))

    # every restart found position and counter committed together, and never going back
    assert all(records == applied + 1 for applied, records in restarts), restarts
    assert [a for a, _ in restarts] == sorted(a for a, _ in restarts)
    assert restarts[-1][0] < long_log.records - 1, "the kills left nothing for the last run"
    assert sum(1 for a, _ in restarts if a >= 0) >= KILLS // 2, "most kills applied nothing"

    with ShardStore.open(db, identity=IDENTITY) as store:
        assert store.applied_position() == long_log.records - 1
        assert records_applied(store) == long_log.records
        assert store_digest(store) == long_log.digest


# restarts in process -----------------------------------------------------------------------
def run_into(db: Path, log_dir: Path, *, stop_at: int | None = None,
             batch_records: int = 128) -> tuple[int, int | None, int, str]:
    """Open ``db``, apply the log (up to ``stop_at``), close; what was applied and left."""
    log = FileShardLog(log_dir, create=False)
    try:
        with ShardStore.open(db, identity=IDENTITY, create=True) as store:
            runner = ShardRunner(store, log, batch_records=batch_records)
            resumed_at = runner.next_position
            applied_now = runner.run_until_caught_up(stop_at=stop_at)
            assert runner.next_position == resumed_at + applied_now
            return (applied_now, store.applied_position(), records_applied(store),
                    store_digest(store))
    finally:
        log.close()


def test_rerunning_a_caught_up_database_is_a_no_op(short_log: BuiltLog, tmp_path: Path) -> None:
    """A runner started on a database that already applied the whole log applies nothing
    and changes nothing: same position, same counter, same digest."""
    db = tmp_path / "db"
    first = run_into(db, short_log.directory)
    assert first == (short_log.records, short_log.records - 1, short_log.records,
                     short_log.digest)
    for batch_records in (1, 128, 10_000):
        again = run_into(db, short_log.directory, batch_records=batch_records)
        assert again == (0, *first[1:])


@pytest.mark.parametrize("stop_at", [0, 1, 127, 1_000, 2_998])
def test_runner_restarted_mid_log_resumes_where_it_stopped(
    short_log: BuiltLog, tmp_path: Path, stop_at: int
) -> None:
    """Applying up to ``stop_at``, closing and reopening resumes at ``stop_at + 1`` and ends
    with the digest of a single pass; nothing is applied twice or skipped."""
    db = tmp_path / "db"
    applied, position, records, _ = run_into(db, short_log.directory, stop_at=stop_at)
    assert (applied, position, records) == (stop_at + 1, stop_at, stop_at + 1)

    rest, position, records, digest = run_into(db, short_log.directory, batch_records=333)
    assert rest == short_log.records - stop_at - 1
    assert (position, records) == (short_log.records - 1, short_log.records)
    assert digest == short_log.digest


def test_partial_replay_digest_differs_until_finished(short_log: BuiltLog, tmp_path: Path) -> None:
    """The digest comparison has teeth: a database stopped part-way does not match."""
    _, _, _, partial = run_into(tmp_path / "db", short_log.directory, stop_at=1_500)
    assert partial != short_log.digest
