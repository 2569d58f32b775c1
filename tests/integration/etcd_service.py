"""The real etcd server for integration tests, started with ``scripts/services up etcd``.

An adapter is never tested only against a mock, so when etcd cannot be started the tests
that need it FAIL, naming what is missing; they never skip. The session fixture
``etcd_service`` does not raise itself: it hands over an ``EtcdService`` whose ``require()``
fails the calling test (in its call phase, so it is reported as a failure with the script's
own explanation).

The server is stopped at the end of the session only if this fixture started it; one that
was already running (``scripts/services up etcd`` by hand, or by ``.ci/run``) is left
running. The client URL comes from ``scripts/services env`` (``NEREUS_ETCD_ENDPOINT``), which
honours the same ``NEREUS_ETCD_*`` overrides as ``up``.

``watching`` owns the thread that drains an etcd3gw watch: etcd3gw's event iterator blocks
until an event comes (forever if none does, or if the server goes away), so a test reads the
events from a queue, each under a deadline.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tests.integration.services import Service, bring_up, cannot_start, session_service

if TYPE_CHECKING:
    from etcd3gw.client import Etcd3Client
    from etcd3gw.types import Event

__all__ = ["EtcdEndpoint", "EtcdService", "WatchedEvents", "etcd_endpoint", "etcd_service",
           "watching"]

ETCD_NEEDS = ("Needs etcd 3.4+ on PATH (or NEREUS_ETCD_BIN) or, to fetch Debian's etcd-server "
              "package, apt-get and dpkg-deb (root once, if apt has no package lists yet); the "
              "readiness probe needs etcd3gw in .venv (`make install`)")


@dataclass(frozen=True, slots=True)
class EtcdEndpoint:
    """Where etcd's client port listens (v3 API; its JSON gateway under ``/v3/``)."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self, *, timeout_s: float = 10.0) -> Etcd3Client:
        """A plain etcd3gw client; every request (not a watch's stream) is bounded by
        ``timeout_s``."""
        from etcd3gw.client import Etcd3Client

        return Etcd3Client(host=self.host, port=self.port, timeout=timeout_s)


EtcdService = Service[EtcdEndpoint]


def endpoint_from_url(url: str) -> EtcdEndpoint:
    """``http://HOST:PORT`` as an endpoint; ValueError names a URL without host or port."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None or parts.port is None:
        raise ValueError(f"not an http://HOST:PORT etcd client URL: {url!r}")
    return EtcdEndpoint(parts.hostname, parts.port)


def _cannot_start(detail: str) -> EtcdService:
    return EtcdService(None, error=cannot_start(
        "etcd", "the etcd coordinator", detail, needs=ETCD_NEEDS))


def _start_etcd() -> tuple[EtcdService, bool]:
    """Start etcd unless it runs; returns the service and whether this call started it."""
    settings, started, problem = bring_up("etcd")
    if settings is None:
        return _cannot_start(problem or "unknown problem"), started
    if "NEREUS_ETCD_ENDPOINT" not in settings:
        return _cannot_start("`scripts/services env` has no NEREUS_ETCD_ENDPOINT"), started
    try:
        return EtcdService(endpoint_from_url(settings["NEREUS_ETCD_ENDPOINT"])), started
    except ValueError as exc:
        return _cannot_start(f"`scripts/services env`: {exc}"), started


@pytest.fixture(scope="session")
def etcd_service() -> Iterator[EtcdService]:
    """etcd from ``scripts/services``, up for the whole session (stopped only if we started
    it). Call ``require()`` on it to get the endpoint or fail the test."""
    yield from session_service("etcd", _start_etcd)


@pytest.fixture
def etcd_endpoint(etcd_service: EtcdService) -> EtcdEndpoint:
    """The server's client endpoint (fails the test when etcd could not start)."""
    return etcd_service.require()


class WatchedEvents:
    """The events of one watch, drained into a queue by a thread this object owns."""

    def __init__(self, events: Iterator[Event]) -> None:
        self._queue: queue.Queue[Event] = queue.Queue()
        self._thread = threading.Thread(target=self._drain, args=(events,),
                                        name="etcd-watch-drain", daemon=True)

    def _drain(self, events: Iterator[Event]) -> None:
        for event in events:
            self._queue.put(event)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> bool:
        """Wait for the drain to end (after the watch is cancelled); True if it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def poll(self, within_s: float) -> Event | None:
        """The next event, or None if none comes within ``within_s``."""
        try:
            return self._queue.get(timeout=within_s)
        except queue.Empty:
            return None

    def next(self, within_s: float, what: str) -> Event:
        """The next event; fails the test naming ``what`` if none comes within ``within_s``."""
        event = self.poll(within_s)
        if event is None:
            pytest.fail(f"no watch event within {within_s} s: expected {what}")
        return event


@contextlib.contextmanager
def watching(client: Etcd3Client, prefix: str, *, start_revision: int) -> Iterator[WatchedEvents]:
    """Watch every key under ``prefix`` from ``start_revision`` on (so nothing written at or
    after it is missed, however late the watch is registered); cancelled on exit."""
    events, cancel = client.watch_prefix(prefix, start_revision=start_revision)
    watched = WatchedEvents(events)
    watched.start()
    try:
        yield watched
    finally:
        cancel()
        if not watched.join(5.0):
            raise RuntimeError(f"the watch on {prefix!r} did not end within 5 s of its cancel")
