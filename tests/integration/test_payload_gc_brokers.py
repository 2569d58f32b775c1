"""Large payloads are collected on routes whose Shard Log is a real Kafka or Pulsar
Command Topic, as on the file log: ``nereus payload gc`` reads each shard's unapplied tail
from the topic (a commit queued there and not yet applied keeps its object), and the
engine's own collector runs on such a home and deletes a published, swept message's
object by itself."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.local_dir import LocalObjectStore
from tests.conftest import run_nereus
from tests.daemon import running_engine
from tests.integration.broker_homes import point_route_at
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.integration.large_payload_homes import (
    collect_quickly,
    gc,
    keys_of,
    payload_file,
    payload_objects,
    shrink_inline_limit,
)
from tests.integration.pulsar_service import PulsarService, pulsar_service  # noqa: F401
from tests.polling import wait_until


def _broker_home(tmp_path: Path, log: str, settings: dict[str, str]) -> tuple[Path, str]:
    """A one-shard home on a fresh Command Topic of ``log`` (its addresses ``settings``),
    a tiny inline limit, retention 1 s on lane ``local`` and the engine's collection every
    second."""
    route = f"r{uuid.uuid4().hex[:10]}"
    home = tmp_path / "home"
    made = run_nereus("init", "--log", log, "--route", route, home=home, timeout=120)
    assert made.code == 0, made.stderr
    config = home / "nereus.toml"
    point_route_at(config, settings)
    shrink_inline_limit(config)
    collect_quickly(config)
    return home, route


def _collects_through_the_topic(tmp_path: Path, home: Path, route: str) -> None:
    """Queued without an engine, the commit is only in the topic: gc keeps its object and
    deletes a stray one; then the engine publishes the message, retention sweeps it and
    the engine's collector deletes the object."""
    queued = run_nereus("--json", "message", "schedule", "--lane", "local", "--delay", "2s",
                        "--id", "sent", "--payload-file", str(payload_file(tmp_path)),
                        home=home, timeout=120)
    assert queued.code == 0, queued.stdout + queued.stderr
    committed = queued.json()["payload_object"]
    stray = f"payloads/{route}/0/no-stage-anywhere"
    LocalObjectStore(home / "objects").put_bytes(stray, b"stray")

    done = gc(home, "--yes")
    assert done.code == 0, done.stdout + done.stderr
    report = done.json()
    assert keys_of(report["deleted"]) == {stray}
    [kept] = report["kept"]
    assert kept["key"] == committed
    assert "COMMITTED" in kept["reason"] and "queued, not yet applied" in kept["reason"], kept
    assert payload_objects(home) == {committed}

    with running_engine(home):
        def collected() -> bool:
            swept = run_nereus("--json", "message", "show", "sent", home=home).code != 0
            return swept and committed not in payload_objects(home)

        wait_until("the message published and swept and its object collected by the engine",
                   collected, 90, interval_s=0.5)
        status = run_nereus("--json", "engine", "status", home=home)
        assert status.code == 0, status.stderr
        workers = {w["name"]: w for w in json.loads(status.stdout)["workers"]}
        assert workers["payload-gc"]["state"] == "RUNNING", workers.get("payload-gc")
    assert '"payload_gc"' in (home / "log" / "engine.log").read_text()


@pytest.mark.timeout(240)
def test_payloads_are_collected_on_a_kafka_route(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """On a Kafka Command Topic: the queued commit keeps its object, the engine collects it
    once its message was published and swept."""
    home, route = _broker_home(tmp_path, "kafka", {"bootstrap": kafka_service.require()})
    _collects_through_the_topic(tmp_path, home, route)


@pytest.mark.timeout(240)
def test_payloads_are_collected_on_a_pulsar_route(
        tmp_path: Path, pulsar_service: PulsarService) -> None:  # noqa: F811
    """On a Pulsar Command Topic (sparse positions): the same."""
    endpoint = pulsar_service.require()
    home, route = _broker_home(tmp_path, "pulsar", {"service_url": endpoint.service_url,
                                                    "admin_url": endpoint.admin_url})
    _collects_through_the_topic(tmp_path, home, route)
