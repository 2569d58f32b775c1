"""The Command Topic's broker stops for 30 s under load: the shard loops resume by themselves.

The route's Shard Log is a real Kafka topic; the lane is the file destination, so every
outcome is known the moment the publisher has it. A stream of messages is due across the
run; Kafka is stopped (``scripts/services down kafka``) while they publish and started again
30 s later (three times librdkafka's longest reconnect backoff; it was 60 s, cut to keep
CI's serial part short). Nothing restarts the engine. Afterwards: every shard is ACTIVE
again (its loop resumed by itself, through supervision if it crashed), every message is
PUBLISHED exactly once and none early, and no attempt ended UNKNOWN: an outcome held while
the log was away is appended when it returns, never turned into an UNCERTAIN message.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from nereus.client import RouteRef, prepare_schedule, queue
from nereus.layout import HomeLayout
from nereus.timespec import parse_time_ms
from tests.daemon import DaemonRun, owned_processes, read_outbox
from tests.integration.broker_homes import kafka_logs, kafka_route, write_home
from tests.integration.engine_harness import file_lane
from tests.integration.kafka_service import (  # noqa: F401
    KafkaService,
    kafka_restored,
    kafka_service,
    switch_kafka,
)
from tests.polling import now_ms, wait_until

PARTITIONS = 2
MESSAGES = 240
SPREAD_MS = 45_000  # due from now + LEAD_MS over this span
LEAD_MS = 2_000
OUTAGE_S = 30
POLL_S = 0.1

pytestmark = pytest.mark.serial  # it stops the Kafka broker every Kafka test shares


def queue_the_stream(bootstrap: str, command_topic: str) -> set[str]:
    """MESSAGES due across the run, straight to the Command Topic; their ids."""
    route = RouteRef("default", PARTITIONS)
    base = now_ms() + LEAD_MS
    ids = {f"o{n:04d}": base + n * SPREAD_MS // MESSAGES for n in range(MESSAGES)}
    with kafka_logs(bootstrap, command_topic, PARTITIONS) as logs:
        queue([prepare_schedule(route, command_id=f"s-{mid}", delay_message_id=mid,
                                lane="local", deliver_at_ms=at, payload=mid.encode())
               for mid, at in ids.items()], logs)
    return set(ids)


def hold_kafka_down(daemon: DaemonRun, outbox: Path) -> int:
    """Kafka stopped for OUTAGE_S while the stream publishes, then started again; how many
    were published when it stopped. Meanwhile status answers (each try waits at most 10 s),
    every shard without a log end and with the reason."""
    wait_until("publishing under way", lambda: len(read_outbox(outbox)) >= 20, 30,
               interval_s=POLL_S)
    with kafka_restored():
        switch_kafka("down")
        down_at = time.monotonic()
        published_at_stop = len(read_outbox(outbox))
        wait_until("a status during the outage, naming each shard's unanswered log",
                   lambda: logs_unanswered(daemon), OUTAGE_S / 2, interval_s=1,
                   seen=daemon.status)
        time.sleep(max(OUTAGE_S - (time.monotonic() - down_at), 0))
    return published_at_stop


def logs_unanswered(daemon: DaemonRun) -> bool:
    status = daemon.status()
    return status is not None and all(
        s["log_end_position"] is None and s["error"] for s in status["shards"])


def all_published(daemon: DaemonRun) -> bool:
    status = daemon.status()
    if status is None:
        return False
    (lane,) = status["lanes"]
    by_state = lane["messages_by_state"]
    return (all(s["state"] == "ACTIVE" and s["in_flight"] == 0 for s in status["shards"])
            and by_state.get("PUBLISHED", 0) == MESSAGES)


def check_resumed(daemon: DaemonRun, pid: int) -> None:
    """The same daemon, every shard worker RUNNING, no message or attempt left in doubt."""
    status = daemon.status()
    assert status is not None
    assert daemon.proc.poll() is None and daemon.proc.pid == pid
    assert all(s["uncertain"] == 0 for s in status["shards"]), status["shards"]
    shards = [w for w in status["workers"] if w["kind"] == "shard"]
    assert len(shards) == PARTITIONS and all(w["state"] == "RUNNING" for w in shards), shards
    (lane,) = status["lanes"]
    assert "UNCERTAIN" not in lane["messages_by_state"], lane


def check_outbox(outbox: Path, ids: set[str]) -> None:
    """Every message in the outbox once, none before its deliverAt."""
    lines = read_outbox(outbox)
    assert sorted(line["delay_message_id"] for line in lines) == sorted(ids), (
        "a message published twice, or missing")
    early = [line for line in lines
             if parse_time_ms(line["published_at"]) < parse_time_ms(line["deliver_at"])]
    assert not early, early[:3]


@pytest.mark.timeout(420)
def test_shard_loops_resume_after_a_30_s_command_topic_outage(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Kafka down 30 s under load, then up: the loops resume by themselves, every message is
    PUBLISHED once and on time, and no attempt in flight became UNCERTAIN."""
    bootstrap = kafka_service.require()
    command_topic = f"nereus.outage-{uuid.uuid4().hex[:10]}.commands"
    home = tmp_path / "home"
    write_home(home, kafka_route(bootstrap, command_topic, PARTITIONS),
               file_lane("local", "outbox/local.jsonl"))
    outbox = HomeLayout(home).outbox / "local.jsonl"
    with owned_processes() as owned:
        daemon = DaemonRun(home, 0, owned)
        daemon.wait_ready()
        pid = daemon.proc.pid
        ids = queue_the_stream(bootstrap, command_topic)
        published_at_stop = hold_kafka_down(daemon, outbox)
        assert published_at_stop < MESSAGES, "the outage came too late to hit publishing"
        wait_until("every message PUBLISHED after the broker returned",
                   lambda: all_published(daemon), 120, interval_s=POLL_S,
                   seen=lambda: daemon.status() or f"no answer; output:\n{daemon.output()}")
        check_resumed(daemon, pid)
        check_outbox(outbox, ids)
        attempts = daemon.admin.get("/v1/attempts")
        assert not attempts["attempts"], attempts
