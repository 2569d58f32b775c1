"""Kafka Command Topics keep what recovery needs.

A new Command Topic keeps every record (``retention.ms=-1``) unless the route configures a
retention, with the replication factor and ``min.insync.replicas`` the route asks for (by
default the smaller of 3 and the broker count, and of 2 and that factor). ``doctor``
warns below 3/2 and compares a bounded retention with the Recovery Floor. ``shard prune``
deletes records below the Recovery Floor with DeleteRecords, and refuses to go above it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.polling import wait_until


def kafka_home(tmp_path: Path, bootstrap: str, *, extra: str = "") -> tuple[Path, str]:
    route = f"r{uuid.uuid4().hex[:10]}"
    home = tmp_path / "home"
    result = run_nereus("init", "--log", "kafka", "--route", route, home=home, timeout=120)
    assert result.code == 0, result.stderr
    config = home / "nereus.toml"
    text = re.sub(r'bootstrap = "[^"]*"', f'bootstrap = "{bootstrap}"', config.read_text())
    config.write_text(text.replace("partitions = 1\n", f"partitions = 1\n{extra}"))
    return home, route


def test_a_new_command_topic_keeps_every_record_and_is_replicated_as_asked(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Defaults on one broker: retention.ms=-1, replication 1, min.insync.replicas 1; a
    configured retention and min.insync.replicas reach the topic."""
    bootstrap = kafka_service.require()
    default = KafkaShardLog(bootstrap, f"nereus.ret-{uuid.uuid4().hex[:8]}.commands", 0)
    try:
        settings = default.topic_config()
        assert settings["retention.ms"] == "-1"
        assert settings["message.timestamp.type"] == "LogAppendTime"
        assert (default.replication_factor(), settings["min.insync.replicas"]) == (1, "1")
    finally:
        default.close()
    bounded = KafkaShardLog(bootstrap, f"nereus.ret-{uuid.uuid4().hex[:8]}.commands", 0,
                            retention_ms=3_600_000, min_insync_replicas=1)
    try:
        assert bounded.topic_config()["retention.ms"] == "3600000"
    finally:
        bounded.close()


def test_doctor_warns_below_three_replicas_and_compares_retention_with_the_floor(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """One broker: the replication check is a warning. A route with retention_ms = 2000 and
    no checkpoint: once the record at the Recovery Floor (position 0) is older than most of
    the retention, doctor fails naming the floor and what to do."""
    bootstrap = kafka_service.require()
    home = tmp_path / "home"
    route = f"r{uuid.uuid4().hex[:10]}"
    topic = f"nereus.{route}.commands"
    home.mkdir()
    (home / "nereus.toml").write_text(f"""
[routes.{route}]
id = "{uuid.uuid4().hex}"
log = "kafka"
bootstrap = "{bootstrap}"
partitions = 1
retention_ms = 2000

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"
""")
    # the first append creates the topic with the configured retention
    assert run_nereus("message", "schedule", "--route", route, "--lane", "local", "--delay",
                      "1h", "--id", "m0", home=home, timeout=120).code == 0
    log = KafkaShardLog(bootstrap, topic, 0, create=False)
    try:
        assert log.topic_config()["retention.ms"] == "2000"
        (head,) = log.read(0, 1)
    finally:
        log.close()
    wait_until("the floor record older than most of the retention",
               lambda: time.time_ns() // 1_000_000 - head.broker_ms > 1_700, 10)
    doctor = run_nereus("--json", "doctor", home=home, timeout=120)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    replication = checks[f"command_topic {topic} replication"]
    assert (replication["ok"], replication["severity"]) == (False, "warning")
    assert "replication factor 1, min.insync.replicas 1" in replication["detail"]
    retention = checks[f"command_topic {topic} retention"]
    assert (retention["ok"], retention["severity"]) == (False, "error")
    assert "Recovery Floor (0)" in retention["detail"] and "retention.ms=2000" in \
        retention["detail"]
    assert "checkpoint" in retention["fix"]
    assert doctor.code == 1


def test_shard_prune_deletes_kafka_records_below_the_floor_and_never_above(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Records applied and checkpointed: prune deletes below the Recovery Floor (the log
    then starts there), refuses past it, and the engine starts again on the pruned log."""
    home, route = kafka_home(tmp_path, kafka_service.require())
    shard = f"{route}/0"
    with running_engine(home):
        for n in range(30):
            assert run_nereus("message", "schedule", "--route", route, "--lane", "local",
                              "--delay", "1h", "--id", f"m{n}", home=home).code == 0
        wait_until("m29 applied",
                   lambda: run_nereus("--json", "message", "show", "m29", "--route", route,
                                      home=home).code == 0, 30)
        taken = run_nereus("--json", "checkpoint", "create", shard, home=home, timeout=120)
        assert taken.code == 0, taken.stderr
    floor = int(taken.json()["applied_position"]) + 1
    refused = run_nereus("shard", "prune", shard, "--before", str(floor + 1), home=home,
                         timeout=120)
    assert refused.code == 1 and "Recovery Floor" in refused.stderr
    pruned = run_nereus("--json", "shard", "prune", shard, home=home, timeout=120)
    assert pruned.code == 0, pruned.stderr
    data = pruned.json()
    assert data["log_start_position"] == floor and data["deleted"]
    with running_engine(home):
        shown = run_nereus("--json", "message", "show", "m0", "--route", route, home=home)
        assert shown.code == 0 and shown.json()["state"] == "SCHEDULED"
