"""The engine daemon SIGKILLed again and again: nothing lost, nothing sent twice, doubt shown.

A publish attempt is admitted through the Shard Log (PUBLISHING) before the destination is
called and its outcome is appended afterwards; a restart turns every attempt still
PUBLISHING into UNKNOWN (message UNCERTAIN), which is never retried automatically. So
whatever instant the daemon dies at, once it runs again and everything is due:

* every record in each shard's log was applied exactly once (the records counter equals
  the log's end, every record left a result, every receipt names its own record);
* every message scheduled and not successfully cancelled is PUBLISHED or UNCERTAIN, never
  PUBLISHING, SCHEDULED or lost; UNCERTAIN ones show an UNKNOWN attempt with evidence;
* the outbox holds every PUBLISHED message exactly once (its published attempt), an
  UNCERTAIN one at most once, and nothing else.

The daemon is a subprocess this test owns (``python -m nereus.engine.daemon``); commands
arrive as an operator sends them (concurrent ``nereus message schedule --batch`` runs and
``nereus message cancel``) plus client-library cancels appended straight to the log.
Kill instants come from a seeded RNG: some during the schedule burst, some while due
messages are being published. Every wait polls a condition under a deadline; every child
process is killed in the finalizer.

This test found the engine sharing one ``FileShardLog`` between the shard loop and the
admin threads without a thread lock (``flock`` only excludes other processes): duplicate
receipt positions, a phantom lag, and a durable frame cut as a "torn tail" that left the
log unreadable. ``FileShardLog`` now puts a thread mutex in front of its ``flock``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.shardlog.file import FileShardLog
from nereus.client import RouteRef, prepare_cancel, queue
from nereus.layout import HomeLayout
from nereus.machine import dedup_key
from nereus.records import (
    AttemptState,
    Cancel,
    DecodeFailure,
    MessageState,
    ResultStatus,
    Schedule,
    decode,
)
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Result, decode_int, decode_value
from nereus.views import find_message, message_attempts, open_attempts
from tests.conftest import NEREUS, run_nereus
from tests.daemon import DaemonRun

SEED = 20_260_807
KILLS = 5
BATCHES_PER_ROUND = 3
BATCH_STAGGER_S = 0.2
BATCH_LINES = 1_000
IMMEDIATE_SHARE = 0.35  # due at once; the rest 1-3 s out
CLI_CANCELS_PER_ROUND = 2
LIBRARY_CANCELS_PER_ROUND = 150
PARTITIONS = 2
READY_DEADLINE_S = 20.0
CLI_DEADLINE_S = 60.0
SETTLE_DEADLINE_S = 40.0
POLL_S = 0.005

pytestmark = pytest.mark.slow


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_for(what: str, condition: Callable[[], bool], deadline_s: float,
             interval_s: float = POLL_S, seen: Callable[[], object] | None = None) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` (and ``seen()``) after
    ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            last = f"; last seen: {seen()}" if seen is not None else ""
            pytest.fail(f"{what}: not reached within {deadline_s} s{last}")
        time.sleep(interval_s)


# commands -------------------------------------------------------------------------------
@dataclass
class Sent:
    """What the test sent, and the receipts it got back."""

    schedule_ids: list[str] = field(default_factory=list)
    later_ids: list[str] = field(default_factory=list)  # due 1-3 s after they were sent
    last_deliver_at_ms: int = 0
    receipts: list[dict[str, Any]] = field(default_factory=list)  # command_id, shard, position
    receipted_schedules: set[str] = field(default_factory=set)
    cli_runs: Counter[str] = field(default_factory=Counter)
    kills: list[str] = field(default_factory=list)
    owned: list[subprocess.Popen[bytes]] = field(default_factory=list)  # killed at the end


def write_batch(path: Path, rng: random.Random, prefix: str, sent: Sent) -> None:
    start = now_ms()
    lines = []
    for n in range(BATCH_LINES):
        message_id = f"{prefix}-{n}"
        if rng.random() < IMMEDIATE_SHARE:
            deliver_at_ms = start - rng.randrange(500)
        else:
            deliver_at_ms = start + rng.randrange(1_000, 3_000)
            sent.later_ids.append(message_id)
        sent.schedule_ids.append(message_id)
        sent.last_deliver_at_ms = max(sent.last_deliver_at_ms, deliver_at_ms)
        lines.append(json.dumps({
            "id": message_id, "lane": "local", "deliver_at": str(deliver_at_ms),
            "key": f"k{n % 31}", "headers": {"n": str(n)}, "payload": f"{prefix} {n} " * 4,
        }))
    path.write_text("\n".join(lines) + "\n")


def launch(home: Path, out: Path, sent: Sent,
           *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``nereus --home H --json ARGS`` in the background, stdout into ``out``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEREUS_")}
    environ["NO_COLOR"] = "1"
    with open(out, "wb") as handle:
        proc = subprocess.Popen([NEREUS, "--home", str(home), "--json", *args],
                                stdin=subprocess.DEVNULL, stdout=handle,
                                stderr=subprocess.STDOUT, env=environ)
    sent.owned.append(proc)
    return proc, out


def collect(runs: list[tuple[subprocess.Popen[bytes], Path]], sent: Sent) -> None:
    """Wait for every CLI run; keep the receipts of those that answered (killed or not)."""
    for proc, out in runs:
        code = proc.wait(timeout=CLI_DEADLINE_S)
        text = out.read_text(errors="replace")
        sent.cli_runs["ok" if code == 0 else f"exit {code}"] += 1
        if code != 0:
            continue  # the engine died under it: the log alone says what was queued
        data = json.loads(text)
        for receipt in data.get("receipts", [data]):
            if receipt["kind"] == "SCHEDULE":
                sent.receipted_schedules.add(receipt["delay_message_id"])
            sent.receipts.append({"command_id": receipt["command_id"], "shard": receipt["shard"],
                                  "position": receipt["source_position"]})


def library_cancels(home: Path, ids: list[str], rng: random.Random, sent: Sent) -> None:
    """Cancels queued with the client library straight to the shards' file logs."""
    route = RouteRef("default", PARTITIONS)
    logs: dict[ShardId, FileShardLog] = {}

    def log_for(shard: ShardId) -> FileShardLog:
        if shard not in logs:
            logs[shard] = FileShardLog(HomeLayout(home).shard_log(shard), create=False)
        return logs[shard]

    prepared = [prepare_cancel(route, command_id=f"cancel-{rng.getrandbits(64):016x}",
                               delay_message_id=message_id) for message_id in ids]
    try:
        for item in queue(prepared, log_for):
            sent.receipts.append({"command_id": item.prepared.command_id,
                                  "shard": str(item.prepared.shard), "position": item.position})
    finally:
        for log in logs.values():
            log.close()


# the kills ------------------------------------------------------------------------------
def outbox_size(home: Path) -> int:
    try:
        return (HomeLayout(home).outbox / "local.jsonl").stat().st_size
    except FileNotFoundError:
        return 0


def crash_round(home: Path, run: int, kind: str, rng: random.Random, sent: Sent,
                work: Path) -> None:
    """Start a daemon, send a burst, SIGKILL it (``burst`` or ``publishing``).

    The batches start ``BATCH_STAGGER_S`` apart, so a burst kill lands while some run,
    some have not started (they then append straight to the log) and some are done.
    """
    daemon = DaemonRun(home, run, sent.owned)
    daemon.wait_ready(READY_DEADLINE_S)
    earlier = list(sent.later_ids)
    pending = []
    for b in range(BATCHES_PER_ROUND):
        path = work / f"batch-{run}-{b}.jsonl"
        write_batch(path, rng, f"r{run}b{b}", sent)
        pending.append((b, path))
    launched = time.monotonic()
    runs = [launch(home, work / f"cancel-{run}-{n}.out", sent, "message", "cancel", message_id)
            for n, message_id in enumerate(rng.sample(earlier, min(CLI_CANCELS_PER_ROUND,
                                                                   len(earlier))))]

    def launch_due(until: float) -> None:
        while pending and time.monotonic() < until:
            b, path = pending[0]
            if time.monotonic() < launched + b * BATCH_STAGGER_S:
                time.sleep(POLL_S)
                continue
            runs.append(launch(home, work / f"batch-{run}-{b}.out", sent, "message",
                               "schedule", "--batch", str(path)))
            pending.pop(0)

    if kind == "burst":
        kill_at = launched + rng.uniform(0.1, BATCHES_PER_ROUND * BATCH_STAGGER_S + 0.3)
        library_cancels(home, rng.sample(earlier, min(LIBRARY_CANCELS_PER_ROUND,
                                                      len(earlier))), rng, sent)
        launch_due(kill_at)
        time.sleep(max(kill_at - time.monotonic(), 0))  # a seeded instant inside the burst
        sent.kills.append(f"burst@{time.monotonic() - launched:.2f}s")
        daemon.kill()
        launch_due(float("inf"))  # the rest find no engine and append to the log directly
        collect(runs, sent)
        return
    launch_due(float("inf"))
    collect(runs, sent)
    fresh = sent.later_ids[len(earlier):]
    library_cancels(home, rng.sample(fresh, LIBRARY_CANCELS_PER_ROUND), rng, sent)
    not_before = launched + rng.uniform(1.0, 2.5)
    last = [outbox_size(home)]

    def publishing_now() -> bool:
        size = outbox_size(home)
        grew, last[0] = size > last[0], size
        return grew and time.monotonic() >= not_before

    wait_for("the outbox growing (publishing in progress)", publishing_now, 15.0,
             interval_s=0.002)
    sent.kills.append(f"publishing@{time.monotonic() - launched:.2f}s")
    daemon.kill()


# the offline checks ---------------------------------------------------------------------
@dataclass
class ShardFacts:
    schedules: dict[str, int] = field(default_factory=dict)  # applied SCHEDULE -> position
    cancelled: set[str] = field(default_factory=set)  # ids with an applied CANCEL
    commands: dict[str, int] = field(default_factory=dict)  # client command id -> position


def read_log(log: FileShardLog, end: int) -> Iterator[tuple[int, bytes]]:
    position = 0
    while position < end:
        records = log.read(position, 5_000)
        assert records, f"{log.directory}: nothing readable at {position} (end {end})"
        for record in records:
            yield record.position, record.payload
        position = records[-1].position + 1


def check_shard(store: ShardStore, log: FileShardLog) -> ShardFacts:
    """Every record applied exactly once, each with its result; what was scheduled/cancelled."""
    end = log.end_position()
    raw = store.get(keys.META_RECORDS)
    assert raw is not None and decode_int(raw) == end, (
        f"{store.path}: records applied {raw and decode_int(raw)} != log end {end}")
    assert store.applied_position() == end - 1
    facts = ShardFacts()
    for position, data in read_log(log, end):
        rejected = store.get(keys.reject_key(position))
        record = decode(data)
        if isinstance(record, DecodeFailure):
            assert rejected is not None, f"undecodable record at {position} has no result"
            continue
        key = dedup_key(record)
        stored = store.get(keys.result_key(key)) if key else None
        assert stored is not None or rejected is not None, (
            f"{store.path}: {type(record).__name__} at {position} has no result")
        if stored is None:
            continue
        result = decode_value(stored, Result)
        mine = result.position == position
        assert mine or rejected is not None or (
            result.record_sha256 == hashlib.sha256(data).hexdigest()), (
            f"{store.path}: record at {position} has neither its own result nor a duplicate's")
        if isinstance(record, Schedule | Cancel):
            facts.commands.setdefault(record.command_id, position)
        if not mine or result.status != ResultStatus.APPLIED:
            continue
        if isinstance(record, Schedule):
            facts.schedules[record.delay_message_id] = position
        elif isinstance(record, Cancel):
            facts.cancelled.add(record.delay_message_id)
    return facts


def read_outbox(home: Path) -> tuple[list[dict[str, Any]], list[bytes]]:
    """(the outbox's JSON lines, its fragments). A SIGKILL inside the destination's write
    leaves a line cut short, which the next batch ends with a newline (as
    ``engine/destinations/file.py`` documents); it must never parse as a publish."""
    path = HomeLayout(home).outbox / "local.jsonl"
    lines, fragments = [], []
    for line in path.read_bytes().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            assert line.startswith(b'{"delay_message_id":"'), (
                f"{path}: a line that is not the start of an outbox line: {line[:120]!r}")
            fragments.append(line)
    return lines, fragments


def fragment_message(fragment: bytes) -> str | None:
    """The delay_message_id a fragment names, if the cut left it whole."""
    head = fragment[len(b'{"delay_message_id":"'):]
    quote = head.find(b'"')
    return head[:quote].decode() if quote > 0 and head[quote:].startswith(b'","') else None


def check_home(home: Path, sent: Sent) -> Counter[str]:
    layout = HomeLayout(home)
    outbox, fragments = read_outbox(home)
    assert len(fragments) <= KILLS, f"{len(fragments)} cut lines after {KILLS} kills"
    torn = {m for m in map(fragment_message, fragments) if m is not None}
    by_message = Counter(line["delay_message_id"] for line in outbox)
    lines_by_id = {line["delay_message_id"]: line for line in outbox}
    states: Counter[str] = Counter()
    scheduled: set[str] = set()
    commands: dict[tuple[str, str], int] = {}
    settled_ids: set[str] = set()
    for partition in range(PARTITIONS):
        shard = ShardId("default", partition)
        log = FileShardLog(layout.shard_log(shard), create=False)
        with ShardStore.open(layout.shard_state(shard), read_only=True) as store:
            facts = check_shard(store, log)
            commands.update({(str(shard), c): p for c, p in facts.commands.items()})
            assert not list(open_attempts(store, state=AttemptState.PUBLISHING)), (
                f"{shard}: attempts still PUBLISHING after a graceful stop")
            for message_id in facts.schedules:
                scheduled.add(message_id)
                message = find_message(store, message_id)
                assert message is not None, f"{message_id}: scheduled, applied, and lost"
                state = message.state
                states[state] += 1
                attempts = message_attempts(store, message_id)
                published = [a for a in attempts if a.state == AttemptState.PUBLISHED]
                unknown = [a for a in attempts if a.state == AttemptState.UNKNOWN]
                copies = by_message.get(message_id, 0)
                if message_id in facts.cancelled:
                    assert state == MessageState.CANCELLED and not attempts, message_id
                    assert copies == 0, f"{message_id}: cancelled, yet in the outbox"
                elif state == MessageState.PUBLISHED:
                    assert len(published) == 1, f"{message_id}: {attempts}"
                    assert copies == 1, f"{message_id}: PUBLISHED, {copies} outbox lines"
                    line = lines_by_id[message_id]
                    assert line["attempt_id"] == published[0].attempt_id, message_id
                elif state == MessageState.UNCERTAIN:
                    assert unknown and all(a.evidence for a in unknown), (
                        f"{message_id}: UNCERTAIN without an UNKNOWN attempt and its evidence: "
                        f"{attempts}")
                    assert copies <= 1, f"{message_id}: UNCERTAIN, {copies} outbox lines"
                    if copies:
                        line = lines_by_id[message_id]
                        assert line["attempt_id"] in {a.attempt_id for a in unknown}
                else:
                    pytest.fail(f"{message_id}: {state} after everything was due "
                                f"(attempts {attempts}, detail {message.detail})")
                if message_id in torn:
                    # its write was cut short, so that attempt never returned PUBLISHED
                    assert state == MessageState.UNCERTAIN, f"{message_id}: torn, yet {state}"
                settled_ids.add(message_id)
        log.close()
    for receipt in sent.receipts:
        position = commands.get((receipt["shard"], receipt["command_id"]))
        assert position == receipt["position"], (
            f"receipt {receipt}: the log holds that command at position {position}")
    assert torn <= settled_ids, f"cut lines of messages never scheduled: {torn - settled_ids}"
    stray = set(by_message) - settled_ids
    assert not stray, f"outbox lines of messages never scheduled: {sorted(stray)[:5]}"
    lost = sent.receipted_schedules - scheduled
    assert not lost, f"receipted SCHEDULEs without an applied message: {sorted(lost)[:5]}"
    assert scheduled <= set(sent.schedule_ids), "messages nobody scheduled"
    return states


# the test -------------------------------------------------------------------------------
def test_sigkill_during_bursts_and_publishing(tmp_path: Path) -> None:
    """Five SIGKILLs (in a schedule burst and while publishing), five restarts: afterwards
    every command was applied once, every message is PUBLISHED (once in the outbox),
    UNCERTAIN (with its UNKNOWN attempt) or CANCELLED, and nothing else is in the outbox."""
    rng = random.Random(SEED)
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    assert run_nereus("init", "--partitions", str(PARTITIONS), home=home).code == 0
    kinds = ["burst", "publishing"] * (KILLS // 2) + ["burst"] * (KILLS % 2)
    rng.shuffle(kinds)
    sent = Sent()
    started = time.monotonic()
    try:
        for run, kind in enumerate(kinds):
            crash_round(home, run, kind, rng, sent, work)
        final = DaemonRun(home, len(kinds), sent.owned)
        final.wait_ready(READY_DEADLINE_S)

        def settled() -> bool:
            status = final.status()
            if status is None or now_ms() < sent.last_deliver_at_ms + 200:
                return False
            failed = {s["shard"]: s["error"] for s in status["shards"] if s["state"] != "ACTIVE"}
            assert not failed, f"shards not ACTIVE after the last restart: {failed}"
            by_state = status["lanes"][0]["messages_by_state"]
            return (all(s["lag"] == 0 and s["in_flight"] == 0 and s["claims"] == 0
                        for s in status["shards"])
                    and not by_state.get("SCHEDULED") and not by_state.get("PUBLISHING"))

        wait_for("everything due published or uncertain", settled, SETTLE_DEADLINE_S,
                 interval_s=0.05, seen=final.status)
        stop = run_nereus("--json", "engine", "stop", "--timeout", "30", home=home)
        assert stop.code == 0, stop.stdout + stop.stderr
        assert final.proc.wait(timeout=30) == 0, final.output()
    finally:
        for proc in sent.owned:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    states = check_home(home, sent)
    print(f"\nseed {SEED}: kills {sent.kills}; {len(sent.schedule_ids)} schedules sent, "
          f"{sum(states.values())} applied; states {dict(states)}; CLI runs "
          f"{dict(sent.cli_runs)}; {time.monotonic() - started:.1f} s")
    assert states[MessageState.PUBLISHED] > 0
    assert states[MessageState.UNCERTAIN] > 0, "no kill hit an admitted attempt: retune timings"
