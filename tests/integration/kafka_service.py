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
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration.services import SERVICES, run_services, services_env

UP_TIMEOUT_S = 900  # a first `up` may fetch the jars from Maven Central
DOWN_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class KafkaService:
    """The session's Kafka broker, or why there is none."""

    bootstrap: str | None
    error: str | None = None

    def require(self) -> str:
        """The bootstrap address; fails the calling test if the broker could not start."""
        if self.bootstrap is None:
            pytest.fail(self.error or "the Kafka service is not available", pytrace=False)
        return self.bootstrap


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _cannot_start(detail: str) -> KafkaService:
    return KafkaService(None, error=(
        "the Kafka service could not be started, so the Kafka Shard Log and destination "
        "cannot be tested against a real broker (a mock is never the only test of an "
        f"adapter).\n{detail}\n"
        "Needs Java 17+ and, until the jars are cached, Maven (`apt-get install "
        "openjdk-17-jre-headless maven`); try `scripts/services up kafka` by hand."))


def _start_kafka() -> tuple[KafkaService, bool]:
    """Start the broker unless it runs; returns the service and whether this call started it."""
    try:
        was_running = run_services("status", "kafka", timeout=30).returncode == 0
        up = run_services("up", "kafka", timeout=UP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return _cannot_start(f"`scripts/services {' '.join(map(str, exc.cmd[1:]))}` did not "
                             f"finish within {exc.timeout:.0f}s"), False
    except OSError as exc:
        return _cannot_start(f"cannot run {SERVICES}: {exc}"), False
    if up.returncode != 0:
        return _cannot_start(f"`scripts/services up kafka` exited {up.returncode}:\n"
                             f"{_tail(up.stderr)}"), False
    started = not was_running and "already running" not in up.stderr
    try:
        bootstrap = services_env()["NEREUS_KAFKA_BOOTSTRAP"]
    except (RuntimeError, KeyError, OSError, subprocess.TimeoutExpired) as exc:
        return _cannot_start(f"cannot read NEREUS_KAFKA_BOOTSTRAP from `scripts/services "
                             f"env`: {exc!r}"), started
    return KafkaService(bootstrap), started


@pytest.fixture(scope="session")
def kafka_service() -> Iterator[KafkaService]:
    """Kafka from ``scripts/services``, up for the whole session (stopped only if we started
    it). Call ``require()`` on it to get the bootstrap address or fail the test."""
    service, started = _start_kafka()
    try:
        yield service
    finally:
        if started:
            down = run_services("down", "kafka", timeout=DOWN_TIMEOUT_S)
            if down.returncode != 0:
                raise RuntimeError(f"`scripts/services down kafka` exited {down.returncode}:"
                                   f"\n{_tail(down.stderr)}")


@pytest.fixture
def kafka_bootstrap(kafka_service: KafkaService) -> str:
    """The broker's bootstrap address (fails the test when the broker could not start)."""
    return kafka_service.require()
