"""The engine SIGKILLed while it publishes to Kafka, on a real broker.

Route and lane are on Kafka, the daemon a subprocess (``python -m nereus.engine.hosting.daemon``).
It is killed once a few hundred of 2,000 due messages are out, then started again: every
command was applied exactly once, every message is PUBLISHED or UNCERTAIN, and the
destination topic holds each PUBLISHED message exactly once and no record of a message
still UNCERTAIN. An UNKNOWN attempt is never retried, so a message whose record never
landed stays UNCERTAIN (for an operator); evidence recovery settles every UNKNOWN attempt
whose record did land, as PUBLISHED.

Every child process is killed in a finalizer; every wait polls a condition under a
deadline. The destination broker stopping mid-run is ``test_broker_faults.py``.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nereus.client import RouteRef, prepare_schedule, queue
from nereus.layout import HomeLayout
from nereus.machine import dedup_key
from nereus.records import AttemptState, DecodeFailure, MessageState, decode
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Attempt
from nereus.views import find_message
from tests.daemon import DaemonRun, owned_processes
from tests.integration.attempt_ledger import attempts_of, check_not_published
from tests.integration.broker_homes import kafka_lane, kafka_logs, kafka_route, write_home
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.integration.kafka_topic import TopicRecord, read_topic
from tests.integration.shard_logs import ShardLogs, check_applied_to_end, read_records
from tests.polling import now_ms, wait_until

SCHEDULES = 2_000
SPREAD_MS = 3_000
SCHEDULE_LEAD_MS = 1_500
KILL_AFTER_PUBLISHED = 400
PARTITIONS = 2

Receipts = dict[tuple[ShardId, int], str]  # (shard, position) -> command id


# set up: a home on Kafka ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KafkaHome:
    home: Path
    bootstrap: str
    command_topic: str
    topic: str  # the lane's destination topic

    @property
    def route(self) -> RouteRef:
        return RouteRef("default", PARTITIONS)

    @property
    def shards(self) -> list[ShardId]:
        return [ShardId("default", p) for p in range(PARTITIONS)]

    def logs(self) -> ShardLogs:
        return kafka_logs(self.bootstrap, self.command_topic, PARTITIONS)


def kafka_home(home: Path, bootstrap: str) -> KafkaHome:
    run = uuid.uuid4().hex[:10]
    made = KafkaHome(home, bootstrap, f"nereus.kill-{run}.commands", f"kill-out-{run}")
    write_home(home, kafka_route(bootstrap, made.command_topic, PARTITIONS),
               kafka_lane("out", bootstrap, made.topic), "[engine]\nevidence_interval_s = 1\n")
    return made


def queue_schedules(made: KafkaHome, logs: ShardLogs) -> tuple[dict[str, int], Receipts]:
    """SCHEDULES messages due over SPREAD_MS, straight to the Command Topic; (deliverAt by
    message, the command id each receipt names)."""
    base = now_ms() + SCHEDULE_LEAD_MS
    deliver = {f"k{n:04d}": base + n * SPREAD_MS // SCHEDULES for n in range(SCHEDULES)}
    prepared = [prepare_schedule(made.route, command_id=f"s-{m}", delay_message_id=m,
                                 lane="out", deliver_at_ms=at, key=m, payload=m.encode())
                for m, at in deliver.items()]
    receipts = {(item.prepared.shard, item.position): item.prepared.command_id
                for item in queue(prepared, logs)}
    return deliver, receipts


# drive the fault: SIGKILL mid-publishing, then a restart that settles ------------------
def kill_while_publishing(first: DaemonRun) -> int:
    """SIGKILL the daemon once KILL_AFTER_PUBLISHED are out; how many were published."""
    wait_until("publishing under way", lambda: first.lane("out")["published"]
               >= KILL_AFTER_PUBLISHED, 30.0, seen=lambda: first.lane("out"))
    published_at_kill: int = first.lane("out")["published"]
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=30)
    assert published_at_kill < SCHEDULES, "the kill came too late to hit publishing"
    return published_at_kill


def settle_and_stop(second: DaemonRun, made: KafkaHome, last_due_ms: int) -> None:
    """The restarted daemon: nothing left due, every UNKNOWN attempt that landed settled by
    evidence recovery, then a clean SIGTERM stop."""
    wait_until("nothing left due", lambda: now_ms() >= last_due_ms + 200 and second.caught_up(),
               60.0, seen=second.status)

    def landed_uncertain() -> set[str]:
        status = second.status()
        if status is None or not any(s["uncertain"] for s in status["shards"]):
            return set()
        answer = second.admin.get("/v1/attempts", state="UNKNOWN")
        unknown = {a["attempt_id"] for a in answer["attempts"]}
        return unknown & {r.attempt_id for r in read_topic(made.bootstrap, made.topic)}

    wait_until("evidence recovery settling every UNKNOWN attempt that landed",
               lambda: not landed_uncertain(), 30.0, seen=landed_uncertain)
    second.proc.send_signal(signal.SIGTERM)
    assert second.exit_status(60) == 0, second.output()


# check what was applied and published --------------------------------------------------
def check_applied(store: ShardStore, shard: ShardId, end: int, applied: dict[int, bytes],
                  receipts: Receipts) -> None:
    """Every record of the log applied once, each with its result; every receipt's too."""
    check_applied_to_end(store, end, shard)
    for position, data in applied.items():
        decoded = decode(data)
        key = None if isinstance(decoded, DecodeFailure) else dedup_key(decoded)
        assert key is None or store.get(keys.result_key(key)) is not None or \
            store.get(keys.reject_key(position)) is not None, (
            f"{shard}@{position}: no result")
    for (receipt_shard, position), command_id in receipts.items():
        if receipt_shard == shard:
            assert store.get(keys.result_key(f"c/{command_id}")) is not None, (
                f"receipt {shard}@{position} ({command_id}) has no result")


def check_attempts(attempts: list[Attempt], by_attempt: dict[str, TopicRecord],
                   topic: str) -> int:
    """Evidence-scanned attempts PUBLISHED at the record they name, the other UNKNOWN ones
    from recovery; returns how many the evidence scan settled."""
    check_not_published(attempts, set(by_attempt))
    by_scan = 0  # attempts made UNKNOWN by the restart, then settled by evidence
    for attempt in attempts:
        if attempt.evidence.startswith("evidence scan:"):
            by_scan += 1
            assert attempt.state == AttemptState.PUBLISHED, attempt
            landed = by_attempt[attempt.attempt_id]
            assert attempt.evidence.endswith(
                f"{topic}/{landed.partition}@{landed.offset}"), attempt
        elif attempt.state == AttemptState.UNKNOWN:
            assert attempt.evidence.startswith("recovery: "), attempt
    return by_scan


def check_message(store: ShardStore, m: str, attempts: list[Attempt], copies: int,
                  by_attempt: dict[str, TopicRecord]) -> MessageState:
    """PUBLISHED once on the topic by its published attempt, or UNCERTAIN and not there."""
    message = find_message(store, m)
    assert message is not None, f"{m}: scheduled, receipted, and lost"
    mine = [a for a in attempts if a.delay_message_id == m]
    if message.state == MessageState.PUBLISHED:
        (won,) = [a for a in mine if a.state == AttemptState.PUBLISHED]
        assert copies == 1, f"{m}: PUBLISHED, {copies} records on the topic"
        assert won.attempt_id in by_attempt, f"{m}: published attempt not on topic"
    else:
        assert message.state == MessageState.UNCERTAIN, (
            f"{m}: {message.state} after everything was due ({mine})")
        assert any(a.state == AttemptState.UNKNOWN for a in mine), mine
        assert copies == 0, f"{m}: UNCERTAIN, {copies} records on the topic"
    return message.state


# the test ------------------------------------------------------------------------------
def test_engine_sigkilled_while_publishing_to_kafka(
    tmp_path: Path, kafka_service: KafkaService,  # noqa: F811
) -> None:
    """SIGKILL mid-publishing, restart: every command applied once, every message PUBLISHED
    or UNCERTAIN, each PUBLISHED message exactly once on the topic, no UNCERTAIN one there."""
    made = kafka_home(tmp_path / "home", kafka_service.require())
    with owned_processes() as owned, made.logs() as logs:
        first = DaemonRun(made.home, 0, owned)
        first.wait_ready()
        deliver, receipts = queue_schedules(made, logs)
        published_at_kill = kill_while_publishing(first)
        second = DaemonRun(made.home, 1, owned)
        second.wait_ready()
        settle_and_stop(second, made, max(deliver.values()))
        ends = {s: logs(s).end_position() for s in made.shards}
        applied = {s: dict(read_records(logs(s), ends[s], s)) for s in made.shards}

    topic_records = read_topic(made.bootstrap, made.topic)
    copies = Counter(r.delay_message_id for r in topic_records)
    by_attempt = {r.attempt_id: r for r in topic_records}
    states: Counter[str] = Counter()
    by_scan = 0
    for shard in made.shards:
        with ShardStore.open(HomeLayout(made.home).shard_state(shard), read_only=True) as store:
            check_applied(store, shard, ends[shard], applied[shard], receipts)
            attempts = attempts_of(store)
            by_scan += check_attempts(attempts, by_attempt, made.topic)
            for m in (m for m in deliver if made.route.shard_for(m) == shard):
                states[check_message(store, m, attempts, copies[m], by_attempt)] += 1
    print(f"\nkilled after {published_at_kill} publishes; states {dict(states)}; settled by "
          f"evidence scan {by_scan}; topic records {len(topic_records)}; log ends "
          f"{ {str(s): e for s, e in ends.items()} }")
    assert sum(states.values()) == SCHEDULES
    assert states[MessageState.UNCERTAIN] + by_scan > 0, (
        "the kill hit no attempt in flight: retune KILL_AFTER_PUBLISHED")
