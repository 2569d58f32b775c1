"""The Command Topic's broker stops for 60 s under load: the shard loops resume by themselves.

The route's Shard Log is a real Kafka topic; the lane is the file destination, so every
outcome is known the moment the publisher has it. A stream of messages is due across the
run; Kafka is stopped (``scripts/services down kafka``) while they publish and started again
60 s later. Nothing restarts the engine. Afterwards: every shard is ACTIVE again (its loop
resumed by itself, through supervision if it crashed), every message is PUBLISHED exactly
once and none early, and no attempt ended UNKNOWN: an outcome held while the log was away is
appended when it returns, never turned into an UNCERTAIN message.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.shardlog.kafka import KafkaShardLog
from nereus.client import RouteRef, prepare_schedule
from nereus.layout import HomeLayout
from nereus.shard import ShardId
from nereus.timespec import parse_time_ms
from tests.daemon import DaemonRun, read_outbox
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.integration.services import run_services

PARTITIONS = 2
MESSAGES = 240
SPREAD_MS = 80_000  # due from now + LEAD_MS over this span
LEAD_MS = 2_000
OUTAGE_S = 60
SERVICE_TIMEOUT_S = 120


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_until(what: str, condition: Any, deadline_s: float, seen: Any = None) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"{what}: not reached in {deadline_s} s; last seen: "
                        f"{seen() if seen else '-'}")
        time.sleep(0.1)


def services(action: str) -> None:
    proc = run_services(action, "kafka", timeout=SERVICE_TIMEOUT_S)
    assert proc.returncode == 0, f"scripts/services {action} kafka: {proc.stderr[-2_000:]}"


@pytest.mark.timeout(420)
def test_shard_loops_resume_after_a_60_s_command_topic_outage(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Kafka down 60 s under load, then up: the loops resume by themselves, every message is
    PUBLISHED once and on time, and no attempt in flight became UNCERTAIN."""
    bootstrap = kafka_service.require()
    command_topic = f"nereus.outage-{uuid.uuid4().hex[:10]}.commands"
    home = tmp_path / "home"
    home.mkdir()
    (home / "nereus.toml").write_text(f"""
[routes.default]
log = "kafka"
bootstrap = "{bootstrap}"
topic = "{command_topic}"
partitions = {PARTITIONS}

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"
""")
    outbox = HomeLayout(home).outbox / "local.jsonl"
    owned: list[Any] = []
    route = RouteRef("default", PARTITIONS)
    try:
        daemon = DaemonRun(home, 0, owned)
        daemon.wait_ready()
        pid = daemon.proc.pid
        base = now_ms() + LEAD_MS
        ids = {f"o{n:04d}": base + n * SPREAD_MS // MESSAGES for n in range(MESSAGES)}
        by_shard: dict[ShardId, list[bytes]] = {}
        for mid, at in ids.items():
            item = prepare_schedule(route, command_id=f"s-{mid}", delay_message_id=mid,
                                    lane="local", deliver_at_ms=at, payload=mid.encode())
            by_shard.setdefault(item.shard, []).append(item.data)
        for shard, payloads in by_shard.items():
            log = KafkaShardLog(bootstrap, command_topic, shard.partition,
                                partitions=PARTITIONS, create=False)
            try:
                log.append(payloads)
            finally:
                log.close()
        wait_until("publishing under way", lambda: len(read_outbox(outbox)) >= 20, 30)
        try:
            services("down")
            down_at = time.monotonic()
            published_at_stop = len(read_outbox(outbox))
            time.sleep(max(OUTAGE_S - (time.monotonic() - down_at), 0))
        finally:
            services("up")
        assert published_at_stop < MESSAGES, "the outage came too late to hit publishing"

        def settled() -> bool:
            status = daemon.status()
            if status is None:
                return False
            (lane,) = status["lanes"]
            by_state = lane["messages_by_state"]
            return (all(s["state"] == "ACTIVE" and s["in_flight"] == 0 for s in status["shards"])
                    and by_state.get("PUBLISHED", 0) == MESSAGES)

        wait_until("every message PUBLISHED after the broker returned", settled, 120,
                   seen=daemon.status)
        status = daemon.status()
        assert status is not None
        assert daemon.proc.poll() is None and daemon.proc.pid == pid
        assert all(s["uncertain"] == 0 for s in status["shards"]), status["shards"]
        shards = [w for w in status["workers"] if w["kind"] == "shard"]
        assert len(shards) == PARTITIONS and all(w["state"] == "RUNNING" for w in shards), shards
        (lane,) = status["lanes"]
        assert "UNCERTAIN" not in lane["messages_by_state"], lane
        lines = read_outbox(outbox)
        assert sorted(line["delay_message_id"] for line in lines) == sorted(ids), (
            "a message published twice, or missing")
        early = [line for line in lines
                 if parse_time_ms(line["published_at"]) < parse_time_ms(line["deliver_at"])]
        assert not early, early[:3]
        attempts = daemon.admin.get("/v1/attempts")
        assert not attempts["attempts"], attempts
    finally:
        for proc in owned:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
