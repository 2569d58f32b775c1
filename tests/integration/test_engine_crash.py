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

The daemon is a subprocess this test owns (``python -m nereus.engine.hosting.daemon``); commands
arrive as an operator sends them (concurrent ``nereus message schedule --batch`` runs and
``nereus message cancel``) plus client-library cancels appended straight to the log.
Kill instants come from a seeded RNG: some during the schedule burst, some while due
messages are being published (the rounds are ``tests/integration/crash_rounds.py``; the
checks are here). Every wait polls a condition under a deadline; every child process is
killed in the finalizer.

This test found the engine sharing one ``FileShardLog`` between the shard loop and the
admin threads without a thread lock (``flock`` only excludes other processes): duplicate
receipt positions, a phantom lag, and a durable frame cut as a "torn tail" that left the
log unreadable. ``FileShardLog`` now puts a thread mutex in front of its ``flock``.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.destination.fencing import FENCED_ABSENCE
from nereus.adapters.backends.shardlog.file_log import FileShardLog
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
from nereus.state.values import Result, decode_value
from nereus.views import find_message, message_attempts, open_attempts
from tests.conftest import run_nereus
from tests.daemon import DaemonRun, owned_processes
from tests.integration.crash_rounds import PARTITIONS, READY_DEADLINE_S, Sent, crash_round
from tests.integration.shard_logs import check_applied_to_end, read_records
from tests.polling import now_ms, wait_until

SEED = 20_260_807
KILLS = 5
SETTLE_DEADLINE_S = 40.0

pytestmark = pytest.mark.slow


# the offline checks ---------------------------------------------------------------------
@dataclass
class ShardFacts:
    schedules: dict[str, int] = field(default_factory=dict)  # applied SCHEDULE -> position
    cancelled: set[str] = field(default_factory=set)  # ids with an applied CANCEL
    commands: dict[str, int] = field(default_factory=dict)  # client command id -> position


def check_shard(store: ShardStore, log: FileShardLog) -> ShardFacts:
    """Every record applied exactly once, each with its result; what was scheduled/cancelled."""
    end = log.end_position()
    check_applied_to_end(store, end, store.path)
    facts = ShardFacts()
    for position, data in read_records(log, end, log.directory):
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
    ``adapters/backends/destination/file_outbox.py`` documents); it must never parse as a
    publish."""
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


def check_message(store: ShardStore, message_id: str, facts: ShardFacts, copies: int,
                  line: dict[str, Any] | None, torn: set[str], hit: set[str]) -> MessageState:
    """An applied SCHEDULE's message: CANCELLED (never in the outbox), PUBLISHED (once, by its
    published attempt) or UNCERTAIN (an UNKNOWN attempt with evidence, at most one line, the
    only outcome for a line cut short); its state."""
    message = find_message(store, message_id)
    assert message is not None, f"{message_id}: scheduled, applied, and lost"
    state = message.state
    attempts = message_attempts(store, message_id)
    published = [a for a in attempts if a.state == AttemptState.PUBLISHED]
    unknown = [a for a in attempts if a.state == AttemptState.UNKNOWN]
    fenced = [a for a in attempts if a.state == AttemptState.NOT_PUBLISHED
              and (a.evidence or "").startswith(FENCED_ABSENCE)]
    if message_id in facts.cancelled:
        # a cancel wins before Publish Admission, or after an attempt proven NOT_PUBLISHED
        assert state == MessageState.CANCELLED and all(
            a.state == AttemptState.NOT_PUBLISHED for a in attempts), (message_id, attempts)
        assert copies == 0, f"{message_id}: cancelled, yet in the outbox"
    elif state == MessageState.PUBLISHED:
        assert len(published) == 1, f"{message_id}: {attempts}"
        if fenced:  # a kill caught its first attempt in flight; recovery proved it absent
            hit.add(message_id)
        assert copies == 1, f"{message_id}: PUBLISHED, {copies} outbox lines"
        assert line is not None and line["attempt_id"] == published[0].attempt_id, message_id
    elif state == MessageState.UNCERTAIN:
        assert unknown and all(a.evidence for a in unknown), (
            f"{message_id}: UNCERTAIN without an UNKNOWN attempt and its evidence: "
            f"{attempts}")
        assert copies <= 1, f"{message_id}: UNCERTAIN, {copies} outbox lines"
        if copies:
            assert line is not None and line["attempt_id"] in {a.attempt_id for a in unknown}
    else:
        pytest.fail(f"{message_id}: {state} after everything was due "
                    f"(attempts {attempts}, detail {message.detail})")
    if message_id in torn:
        # its write was cut short, so that attempt never returned PUBLISHED: UNCERTAIN, or
        # proven absent behind the file lane's writer lock (a cut line is no message)
        assert state == MessageState.UNCERTAIN or fenced, f"{message_id}: torn, yet {state}"
    return state


def check_home(home: Path, sent: Sent) -> tuple[Counter[str], set[str]]:
    """Every shard applied its whole log, every message is where its state says, every
    receipt names its command's position, and the outbox holds nothing nobody scheduled;
    the count of messages by state, and the messages a kill caught in flight that recovery
    proved absent (a file lane fences its dead writer) before a later attempt published."""
    layout = HomeLayout(home)
    hit: set[str] = set()
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
                states[check_message(store, message_id, facts, by_message.get(message_id, 0),
                                     lines_by_id.get(message_id), torn, hit)] += 1
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
    return states, hit


# the test -------------------------------------------------------------------------------
def test_sigkill_during_bursts_and_publishing(tmp_path: Path) -> None:
    """Five SIGKILLs (in a schedule burst and while publishing), five restarts: afterwards
    every command was applied once, every message is PUBLISHED (once in the outbox),
    UNCERTAIN (with its UNKNOWN attempt) or CANCELLED, and nothing else is in the outbox;
    attempts a kill caught in flight are proven absent behind the file lane's writer lock
    (NOT_PUBLISHED, fenced absence) and the message published by a later attempt."""
    rng = random.Random(SEED)
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    assert run_nereus("init", "--partitions", str(PARTITIONS), home=home).code == 0
    kinds = ["burst", "publishing"] * (KILLS // 2) + ["burst"] * (KILLS % 2)
    rng.shuffle(kinds)
    started = time.monotonic()
    with owned_processes() as owned:
        sent = Sent(owned=owned)
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
            return final.caught_up()

        wait_until("everything due published or uncertain", settled, SETTLE_DEADLINE_S,
                   interval_s=0.05, seen=final.status)
        stop = run_nereus("--json", "engine", "stop", "--timeout", "30", home=home)
        assert stop.code == 0, stop.stdout + stop.stderr
        assert final.exit_status(30) == 0, final.output()
    states, hit = check_home(home, sent)
    print(f"\nseed {SEED}: kills {sent.kills}; {len(sent.schedule_ids)} schedules sent, "
          f"{sum(states.values())} applied; states {dict(states)}; CLI runs "
          f"{dict(sent.cli_runs)}; proven absent then published {len(hit)}; "
          f"{time.monotonic() - started:.1f} s")
    assert states[MessageState.PUBLISHED] > 0
    # a kill that caught attempts in flight leaves them UNCERTAIN, or (a file lane fences its
    # dead writer) proven absent at recovery and published by a later attempt
    assert states[MessageState.UNCERTAIN] + len(hit) > 0, \
        "no kill hit an admitted attempt: retune timings"
