"""A real Pulsar standalone for integration tests, started with ``scripts/services``.

Like the S3 fixture in ``tests/integration/services.py``: an adapter is never tested only
against a mock, so when the broker cannot be started the tests that need it FAIL, naming
what is missing; they never skip. The session fixture ``pulsar_service`` hands over a
``PulsarService`` whose ``require()`` fails the calling test when there is no broker.

The broker is stopped at the end of the session only if this fixture started it; one that
was already running (``scripts/services up pulsar`` by hand, or by ``.ci/run``) is left
running. Addresses come from ``scripts/services env`` (so the ``NEREUS_PULSAR_*`` port
overrides apply).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration.services import (
    Service,
    bring_up,
    cannot_start,
    closed_port,
    session_service,
)


@dataclass(frozen=True, slots=True)
class PulsarEndpoint:
    """Where the broker listens: binary protocol and admin REST API."""

    service_url: str
    admin_url: str

    def delete_topic(self, topic: str, *, partitioned: bool) -> None:
        """Force-delete a test topic (best effort: a leftover topic harms nothing)."""
        from nereus.adapters.backends.pulsar.pulsar_client import admin_request, admin_topic_path

        suffix = "/partitions" if partitioned else ""
        with contextlib.suppress(Exception):  # the broker may be going down with the session
            admin_request(self.admin_url, "DELETE",
                          f"admin/v2/{admin_topic_path(topic)}{suffix}?force=true",
                          timeout_s=10)


PulsarService = Service[PulsarEndpoint]

__all__ = ["PulsarEndpoint", "PulsarService", "closed_port", "pulsar_service", "unique_topic"]


def unique_topic(prefix: str) -> str:
    """A topic name no earlier run used."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _cannot_start(detail: str) -> PulsarService:
    return PulsarService(None, error=cannot_start(
        "pulsar", "the Pulsar Shard Log and destination", detail))


def _start_pulsar() -> tuple[PulsarService, bool]:
    """Start Pulsar unless it runs; returns the service and whether this call started it."""
    settings, started, problem = bring_up("pulsar")
    if settings is None:
        return _cannot_start(problem or "unknown problem"), started
    try:
        endpoint = PulsarEndpoint(settings["NEREUS_PULSAR_URL"],
                                  settings["NEREUS_PULSAR_HTTP_URL"])
    except KeyError as exc:
        return _cannot_start(f"`scripts/services env` has no {exc}"), started
    return PulsarService(endpoint), started


@pytest.fixture(scope="session")
def pulsar_service() -> Iterator[PulsarService]:
    """Pulsar standalone from ``scripts/services``, up for the whole session (stopped only if
    we started it). Call ``require()`` on it to get the endpoint or fail the test."""
    yield from session_service("pulsar", _start_pulsar)
