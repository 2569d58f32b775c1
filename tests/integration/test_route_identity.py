"""A route has an identity, and a home never adopts someone else's log.

The first record of every Shard Log partition is the route's ROUTE_IDENTITY (its id from
``nereus init``, name, partition and partition count). An engine start and every client
append check it: another home's log, or the same route with another partition count, is
refused naming the log and the identity found. ``nereus init --log kafka`` on a Command
Topic that already holds another home's route exits 1 unless ``--attach``.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from tests.conftest import CliResult, run_nereus
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401


def init(home: Path, *args: str) -> dict[str, object]:
    result = run_nereus("--json", "init", *args, home=home, timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    data: dict[str, object] = result.json()
    return data


def route_id(home: Path) -> str:
    found = re.search(r'^id = "([^"]+)"', (home / "nereus.toml").read_text(), re.M)
    assert found is not None
    return found.group(1)


def test_a_home_refuses_a_file_log_of_another_route(tmp_path: Path) -> None:
    """Home B's configuration pointed at home A's file log by hand: B's append and B's engine
    start are refused (exit 1) naming the log and A's identity; nothing is appended."""
    a, b = tmp_path / "a", tmp_path / "b"
    init(a)
    init(b)
    assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id", "x",
                      home=a).code == 0
    (b / "shardlog").symlink_to(a / "shardlog")
    refused = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                         "--id", "y", home=b)
    assert refused.code == 1, refused.stdout
    error = json.loads(refused.stdout)["error"]
    assert route_id(a) in error and route_id(b) in error and "shardlog/default/0" in error
    log = run_nereus("--json", "shard", "log", "default/0", home=a)
    assert [json.loads(line)["kind"] for line in log.stdout.splitlines()] == [
        "ROUTE_IDENTITY", "SCHEDULE"]
    started = run_nereus("--json", "engine", "start", "--timeout", "30", home=b, timeout=60)
    assert started.code != 0
    assert route_id(a) in started.stdout + started.stderr


def test_changing_the_partition_count_under_data_is_refused(tmp_path: Path) -> None:
    """partitions 2 -> 3 after messages exist: appends and the engine refuse, saying the ids
    would move and what to set back."""
    home = tmp_path / "home"
    init(home, "--partitions", "2")
    for n in range(4):
        assert run_nereus("message", "schedule", "--lane", "local", "--delay", "1h", "--id",
                          f"m{n}", home=home).code == 0
    config = home / "nereus.toml"
    config.write_text(config.read_text().replace("partitions = 2", "partitions = 3"))
    refused = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                         "--id", "m9", home=home)
    assert refused.code == 1
    document = json.loads(refused.stdout)
    assert "2 partitions" in document["error"] and "partitions = 3" in document["error"]
    assert "partitions = 2" in document["hint"]
    started = run_nereus("engine", "start", "--timeout", "30", home=home, timeout=60)
    assert started.code != 0 and "2 partitions" in started.stdout + started.stderr


def test_init_on_another_homes_command_topic_needs_attach(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Home A inits route R on Kafka and queues a command; home B's `init --log kafka` on the
    same route exits 1 naming the Command Topic and A's identity, writes no nereus.toml;
    with --attach it takes A's identity and sees A's command."""
    bootstrap = kafka_service.require()
    route = f"r{uuid.uuid4().hex[:10]}"
    a, b = tmp_path / "a", tmp_path / "b"

    def init_kafka(home: Path, *extra: str) -> CliResult:
        return run_nereus("--json", "init", "--log", "kafka", "--route", route,
                          "--partitions", "2", *extra, home=home, timeout=120,
                          env={"NEREUS_KAFKA_BOOTSTRAP": bootstrap})

    first = init_kafka(a)
    assert first.code == 0, first.stderr
    _point_at(a, bootstrap)
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "1h",
                        "--id", "from-a", "--route", route, home=a, timeout=60)
    assert queued.code == 0, queued.stderr
    b.mkdir()
    refused = init_kafka(b)
    assert refused.code == 1, refused.stdout
    error = json.loads(refused.stdout)["error"]
    assert f"nereus.{route}.commands" in error and route_id(a) in error
    assert not (b / "nereus.toml").exists()
    attached = init_kafka(b, "--attach")
    assert attached.code == 0, attached.stderr
    (entry,) = json.loads(attached.stdout)["routes"]
    assert entry["attached"] is True and entry["route_id"] == route_id(a)
    assert route_id(b) == route_id(a)
    _point_at(b, bootstrap)
    log = run_nereus("--json", "shard", "log", f"{route}/{json.loads(queued.stdout)['shard'][-1]}",
                     home=b, timeout=60)
    assert "from-a" in log.stdout


def _point_at(home: Path, bootstrap: str) -> None:
    config = home / "nereus.toml"
    config.write_text(re.sub(r'bootstrap = "[^"]*"', f'bootstrap = "{bootstrap}"',
                             config.read_text()))
