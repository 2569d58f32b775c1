"""The real Kafka broker for integration tests, started with ``scripts/services up kafka``.

An adapter is never tested only against a mock, so when the broker cannot be started the
tests that need it FAIL, naming what is missing; they never skip. The session fixture
``kafka_service`` does not raise itself: it hands over a ``KafkaService`` whose
``require()`` fails the calling test (in its call phase, so it is reported as a failure
with the script's own explanation).

The broker is stopped at the end of the session only if this fixture started it; one that
was already running (``scripts/services up kafka`` by hand, or by CI) is left running. The
bootstrap address comes from ``scripts/services env`` (``NEREUS_KAFKA_BOOTSTRAP``), which
honours the same ``NEREUS_KAFKA_*`` overrides as ``up``.

A test that drives a broker fault stops and starts the broker itself (``switch_kafka``)
inside ``kafka_restored``, so Kafka is running again whatever happens in the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

import pytest

from tests.integration.services import (
    Service,
    bring_up,
    cannot_start,
    closed_port,
    run_services,
    session_service,
)

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = ["KafkaService", "closed_port", "kafka_bootstrap", "kafka_restored", "kafka_service",
           "switch_kafka", "text_headers"]

KafkaService = Service[str]  # the bootstrap address
SWITCH_TIMEOUT_S = 120


def text_headers(message: Message) -> dict[str, str]:
    """A consumed record's headers as text: values are decoded, headers without one dropped
    (confluent-kafka gives a list of (name, bytes) pairs; its types also allow a dict)."""
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return {name: value.decode() if isinstance(value, bytes) else value
            for name, value in pairs if value is not None}


def _cannot_start(detail: str) -> KafkaService:
    return KafkaService(None, error=cannot_start(
        "kafka", "the Kafka Shard Log and destination", detail))


def _start_kafka() -> tuple[KafkaService, bool]:
    """Start the broker unless it runs; returns the service and whether this call started it."""
    settings, started, problem = bring_up("kafka")
    if settings is None:
        return _cannot_start(problem or "unknown problem"), started
    if "NEREUS_KAFKA_BOOTSTRAP" not in settings:
        return _cannot_start("`scripts/services env` has no NEREUS_KAFKA_BOOTSTRAP"), started
    return KafkaService(settings["NEREUS_KAFKA_BOOTSTRAP"]), started


@pytest.fixture(scope="session")
def kafka_service() -> Iterator[KafkaService]:
    """Kafka from ``scripts/services``, up for the whole session (stopped only if we started
    it). Call ``require()`` on it to get the bootstrap address or fail the test."""
    yield from session_service("kafka", _start_kafka)


@pytest.fixture
def kafka_bootstrap(kafka_service: KafkaService) -> str:
    """The broker's bootstrap address (fails the test when the broker could not start)."""
    return kafka_service.require()


def switch_kafka(action: Literal["up", "down"]) -> None:
    """``scripts/services ACTION kafka``, which must succeed."""
    proc = run_services(action, "kafka", timeout=SWITCH_TIMEOUT_S)
    assert proc.returncode == 0, f"scripts/services {action} kafka: {proc.stderr[-2_000:]}"


@contextlib.contextmanager
def kafka_restored() -> Iterator[None]:
    """Whatever happens inside, Kafka is running again afterwards (later tests need it)."""
    try:
        yield
    finally:
        if run_services("status", "kafka", timeout=30).returncode != 0:
            switch_kafka("up")
