"""`nereus init --log kafka|pulsar` creates the Command Topic (one partition per shard); a
route whose broker is unreachable fails with exit 5."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.conftest import run_nereus
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.integration.pulsar_service import PulsarService, pulsar_service  # noqa: F401


def test_init_kafka_creates_the_command_topic(tmp_path: Path,
                                              kafka_service: KafkaService) -> None:  # noqa: F811
    """init --log kafka writes the route and creates nereus.<route>.commands with N partitions."""
    from confluent_kafka.admin import AdminClient

    bootstrap = kafka_service.require()
    route = f"r{uuid.uuid4().hex[:8]}"
    result = run_nereus("--json", "init", "--log", "kafka", "--route", route, "--partitions", "3",
                        home=tmp_path / "h")
    assert result.code == 0, result.stderr
    topic = result.json()["routes"][0]["command_topic"]
    assert topic == f"nereus.{route}.commands"
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 3
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--route", route, home=tmp_path / "h")
    assert queued.code == 0, queued.stderr
    assert queued.json()["evidence"] == "QUEUED"


def test_init_pulsar_creates_the_command_topic(tmp_path: Path,
                                               pulsar_service: PulsarService) -> None:  # noqa: F811
    """init --log pulsar creates the partitioned topic nereus-<route>-commands."""
    import json
    import urllib.request

    endpoint = pulsar_service.require()
    route = f"r{uuid.uuid4().hex[:8]}"
    result = run_nereus("--json", "init", "--log", "pulsar", "--route", route, "--partitions",
                        "2", home=tmp_path / "h")
    assert result.code == 0, result.stderr
    topic = result.json()["routes"][0]["command_topic"]
    url = (f"{endpoint.admin_url}/admin/v2/persistent/public/default/{topic}/partitions")
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert json.load(answer)["partitions"] == 2


def test_queueing_to_an_unreachable_kafka_exits_5(tmp_path: Path) -> None:
    """A Kafka route pointing at no broker: queueing fails with exit 5 naming the address."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "nereus.toml").write_text('[routes.default]\nlog = "kafka"\n'
                                      'bootstrap = "127.0.0.1:1"\n\n[lanes.local]\n'
                                      'destination = "file"\npath = "outbox/local.jsonl"\n')
    result = run_nereus("message", "schedule", "--lane", "local", "--delay", "1m", home=home,
                        timeout=120)
    assert result.code == 5, result.stderr
    assert "127.0.0.1:1" in result.stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once it is closed


def test_init_with_a_broker_down_fails_in_seconds_and_quietly(tmp_path: Path) -> None:
    """init --log kafka and --log pulsar with no broker: exit 5 within 5 s of probing (the
    clients' own timeouts took 30 s), a few lines on stderr, none of them librdkafka's
    reconnect chatter (about 1,100 lines before)."""
    import time

    port = _closed_port()
    for log, table in (("kafka", f'bootstrap = "127.0.0.1:{port}"'),
                       ("pulsar", f'service_url = "pulsar://127.0.0.1:{port}"')):
        home = tmp_path / log
        home.mkdir()
        (home / "nereus.toml").write_text(
            f'[routes.default]\nlog = "{log}"\n{table}\n\n[lanes.local]\n'
            'destination = "file"\npath = "outbox/local.jsonl"\n')
        started = time.monotonic()
        result = run_nereus("message", "schedule", "--lane", "local", "--delay", "1m",
                            home=home, timeout=60)
        elapsed = time.monotonic() - started
        assert result.code == 5, result.stderr
        assert elapsed < 10, f"{log}: took {elapsed:.1f} s"
        assert str(port) in result.stderr
        assert len(result.stderr.splitlines()) <= 3, result.stderr
        assert "%3|" not in result.stderr and "FAIL" not in result.stderr
