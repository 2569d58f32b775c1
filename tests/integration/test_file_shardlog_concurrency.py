"""The file Shard Log with several writers at once: processes appending to one partition
share one gapless sequence, a reader tailing a busy writer never reports damage, and
threads sharing one log object never interleave (``flock`` alone would not stop them).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.protocol import LogRecord
from tests.integration.file_segments import positions
from tests.integration.shardlog_contract import read_all

WORKER_DEADLINE_S = 60.0


# several processes -----------------------------------------------------------------------
APPEND_WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from nereus.adapters.backends.shardlog.file_log import FileShardLog

    directory, worker, appends, segment_bytes = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
    log = FileShardLog(Path(directory), segment_bytes=segment_bytes)
    sys.stdin.readline()  # wait for "go" so every worker appends at once
    receipts = []
    for i in range(appends):
        batch = [f"{worker}-{i}-{j}".encode() for j in range(1 + i % 3)]
        for payload, receipt in zip(batch, log.append(batch)):
            receipts.append([receipt.position, receipt.broker_ms, payload.decode()])
    print(json.dumps({"receipts": receipts, "repairs": len(log.repairs)}))
""")


def start_workers(directory: Path, count: int, appends: int,
                  segment_bytes: int) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPEND_WORKER, str(directory), f"w{n}", str(appends),
             str(segment_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for n in range(count)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


@dataclass(frozen=True)
class WorkerReport:
    receipts: list[tuple[int, int, str]]  # (position, broker_ms, payload) per record
    repairs: int


def finish_workers(procs: list[subprocess.Popen[str]]) -> list[WorkerReport]:
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=WORKER_DEADLINE_S)
        assert proc.returncode == 0, err
        raw = json.loads(out)
        reports.append(WorkerReport([tuple(r) for r in raw["receipts"]], raw["repairs"]))
    return reports


def test_several_processes_appending_at_once_share_one_gapless_sequence(log_dir: Path) -> None:
    """4 processes x 200 appends (with rollovers): every payload lands exactly once, at
    positions 0..N-1, where its writer's receipt said, with non-decreasing broker time."""
    log_dir.mkdir(parents=True)
    reports = finish_workers(start_workers(log_dir, 4, 200, 4096))

    reader = FileShardLog(log_dir)
    records = read_all(reader, batch=500)
    total = 4 * sum(1 + i % 3 for i in range(200))
    assert positions(records) == list(range(total))
    assert len({r.payload for r in records}) == total
    assert [r.broker_ms for r in records] == sorted(r.broker_ms for r in records)
    assert len(reader.segments()) > 1
    reader.close()

    by_position = {r.position: (r.broker_ms, r.payload.decode()) for r in records}
    for report in reports:
        assert report.repairs == 0
        mine = [position for position, _, _ in report.receipts]
        assert mine == sorted(mine)
        for position, broker_ms, payload in report.receipts:
            assert by_position[position] == (broker_ms, payload)
    assert sum(len(report.receipts) for report in reports) == total
    spans = sorted((r.receipts[0][0], r.receipts[-1][0]) for r in reports)
    assert any(a_end > b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans)), (
        "the workers never overlapped, so nothing was tested"
    )


BIG_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from nereus.adapters.backends.shardlog.file_log import FileShardLog

    log = FileShardLog(Path(sys.argv[1]), segment_bytes=int(sys.argv[2]))
    for i in range(int(sys.argv[3])):
        log.append([f"{i}-{j}-".encode().ljust(4000, b"p") for j in range(40)])
""")


def test_reader_following_a_busy_writer_never_reports_corruption(log_dir: Path) -> None:
    """A reader tailing the log while another process appends large batches sees records
    appear in order and never mistakes a write in progress for damage."""
    log_dir.mkdir(parents=True)
    batches = 60
    proc = subprocess.Popen(
        [sys.executable, "-c", BIG_WORKER, str(log_dir), str(1 << 20), str(batches)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    reader = FileShardLog(log_dir)
    seen: list[LogRecord] = []
    deadline = time.monotonic() + WORKER_DEADLINE_S
    try:
        while len(seen) < batches * 40:
            assert time.monotonic() < deadline, "the reader never saw every record"
            seen += reader.read(len(seen), 97)
            if proc.poll() is not None and proc.returncode != 0:
                break
    finally:
        _, err = proc.communicate(timeout=WORKER_DEADLINE_S)
    assert proc.returncode == 0, err
    assert positions(seen) == list(range(batches * 40))
    assert seen[-1].payload.startswith(f"{batches - 1}-39-".encode())


def test_end_position_agrees_across_objects_and_processes(log_dir: Path) -> None:
    """end_position read by another object (after another process appended) is the file's
    record count, not a stale cache."""
    log = FileShardLog(log_dir)
    log.append([b"a"])
    assert log.end_position() == 1
    finish_workers(start_workers(log_dir, 1, 10, 1 << 20))
    assert log.end_position() == 1 + sum(1 + i % 3 for i in range(10))


def test_threads_sharing_one_log_object_never_interleave(tmp_path: Path) -> None:
    """Threads appending through one FileShardLog object get distinct, gapless positions.

    flock does not exclude threads sharing a file descriptor; the log must serialise them.
    """
    import threading

    log = FileShardLog(tmp_path / "log", segment_bytes=4096)
    receipts: list[int] = []
    guard = threading.Lock()

    def writer(n: int) -> None:
        for i in range(150):
            got = log.append([f"t{n}-{i}-{'x' * (i % 40)}".encode(), f"t{n}-{i}-b".encode()])
            with guard:
                receipts.extend(r.position for r in got)
            log.end_position()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(receipts) == list(range(4 * 150 * 2))
    records = FileShardLog(tmp_path / "log").read(0, 10_000)
    assert [r.position for r in records] == list(range(4 * 150 * 2))
    assert len({r.payload for r in records}) == len(records)
