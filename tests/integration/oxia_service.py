"""The real Oxia server for integration tests, started with ``scripts/services up oxia``, and
private Oxia servers a test starts for itself.

As for etcd (``etcd_service``), when Oxia cannot be started the tests that need it FAIL,
naming what is missing; they never skip. The session fixture ``oxia_service`` hands over a
``Service`` whose ``require()`` fails the calling test; the server is stopped at the end
of the session only if this fixture started it. The address comes from
``scripts/services env`` (``NEREUS_OXIA_ENDPOINT``, ``NEREUS_OXIA_BIN``).

``PrivateOxia`` runs another ``oxia standalone`` of the same binary on ports and a data
directory of the test's own, for what must not touch the shared server: pausing it
(SIGSTOP), killing and restarting it, a short notification retention, several shards.
``Relay`` is a TCP relay in front of a server that the test can cut and heal, to break one
client's streams while others keep writing.
"""

from __future__ import annotations

import contextlib
import selectors
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.services import Service, bring_up, cannot_start, closed_port, session_service
from tests.polling import wait_until

__all__ = ["OxiaEndpoint", "OxiaService", "PrivateOxia", "Relay", "oxia_endpoint",
           "oxia_service"]

OXIA_NEEDS = ("Needs Go (1.24+) on PATH to build Oxia from its Go module the first time (or "
              "NEREUS_OXIA_BIN); the readiness probe needs grpcio and the generated Oxia "
              "messages in .venv (`make install`)")


@dataclass(frozen=True, slots=True)
class OxiaEndpoint:
    """Where Oxia's public gRPC port listens, and the binary that runs it."""

    host: str
    port: int
    binary: Path

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def url(self, cluster: str) -> str:
        return f"oxia://{self.target}/{cluster}"


OxiaService = Service[OxiaEndpoint]


def _cannot_start(detail: str) -> OxiaService:
    return OxiaService(None, error=cannot_start("oxia", "the Oxia coordinator", detail,
                                                needs=OXIA_NEEDS))


def _start_oxia() -> tuple[OxiaService, bool]:
    """Start Oxia unless it runs; returns the service and whether this call started it."""
    settings, started, problem = bring_up("oxia")
    if settings is None:
        return _cannot_start(problem or "unknown problem"), started
    endpoint = settings.get("NEREUS_OXIA_ENDPOINT", "")
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit() or "NEREUS_OXIA_BIN" not in settings:
        return _cannot_start(f"`scripts/services env`: no NEREUS_OXIA_ENDPOINT/BIN in "
                             f"{settings}"), started
    return OxiaService(OxiaEndpoint(host, int(port), Path(settings["NEREUS_OXIA_BIN"]))), \
        started


@pytest.fixture(scope="session")
def oxia_service() -> Iterator[OxiaService]:
    """Oxia from ``scripts/services``, up for the whole session (stopped only if we started
    it). Call ``require()`` on it to get the endpoint or fail the test."""
    yield from session_service("oxia", _start_oxia)


@pytest.fixture
def oxia_endpoint(oxia_service: OxiaService) -> OxiaEndpoint:
    """The server's endpoint (fails the test when Oxia could not start)."""
    return oxia_service.require()


class PrivateOxia:
    """An ``oxia standalone`` of the test's own (module docstring); ``start`` it (again
    after ``kill``, on the same data and port), ``pause``/``resume`` it, ``kill`` it."""

    def __init__(self, binary: Path, directory: Path, *, shards: int = 1,
                 retention: str = "1h") -> None:
        self.binary = binary
        self.directory = directory
        self.port = closed_port()
        self.metrics_port = closed_port()
        self.shards = shards
        self.retention = retention
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> OxiaEndpoint:
        return OxiaEndpoint("127.0.0.1", self.port, self.binary)

    def start(self) -> None:
        log = open(self.directory / "oxia.log", "ab")  # noqa: SIM115 - the child owns it
        with log:
            self.proc = subprocess.Popen(
                [str(self.binary), "standalone", "--log-json",
                 "--data-dir", str(self.directory / "db"),
                 "--wal-dir", str(self.directory / "wal"),
                 "--public-addr", f"127.0.0.1:{self.port}",
                 "--metrics-addr", f"127.0.0.1:{self.metrics_port}",
                 "--shards", str(self.shards),
                 "--notifications-retention-time", self.retention],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        wait_until("the private Oxia accepts connections", self._accepting, 30)

    def _accepting(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.directory / "oxia.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"the private Oxia exited {self.proc.returncode}: {log}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None


@contextlib.contextmanager
def private_oxia(binary: Path, directory: Path, *, shards: int = 1,
                 retention: str = "1h") -> Iterator[PrivateOxia]:
    """A started ``PrivateOxia``, killed on exit."""
    directory.mkdir(parents=True, exist_ok=True)
    server = PrivateOxia(binary, directory, shards=shards, retention=retention)
    server.start()
    try:
        yield server
    finally:
        server.kill()


class Relay:
    """A TCP relay on a port of its own to ``upstream`` (a ``HOST:PORT``), pumping bytes on
    a thread it owns; ``cut()`` drops every connection and refuses new ones until
    ``heal()``."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self.port = closed_port()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self.heal()
        self._thread = threading.Thread(target=self._run, daemon=True, name="relay")
        self._thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def heal(self) -> None:
        """Accept connections again."""
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(16)
            listener.setblocking(False)
            self._listener = listener
            self._selector.register(listener, selectors.EVENT_READ, "accept")
        self._wake()

    def cut(self) -> None:
        """Close every relayed connection and the listening socket."""
        with self._lock:
            listener, self._listener = self._listener, None
            pairs, self._pairs = self._pairs, []
            if listener is not None:
                self._selector.unregister(listener)
                listener.close()
            for a, b in pairs:
                for sock in (a, b):
                    with contextlib.suppress(KeyError, ValueError):
                        self._selector.unregister(sock)
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
        self._wake()

    def close(self) -> None:
        self._stop.set()
        self.cut()
        self._thread.join(10)
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.5):
                if key.fileobj is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    continue
                with self._lock:
                    if key.data == "accept":
                        self._accept(key.fileobj)  # type: ignore[arg-type]
                    elif isinstance(key.data, socket.socket):
                        self._pump(key.fileobj, key.data)  # type: ignore[arg-type]

    def _accept(self, listener: socket.socket) -> None:
        if listener is not self._listener:
            return
        with contextlib.suppress(BlockingIOError):
            client, _ = listener.accept()
            upstream = socket.create_connection(self._upstream, timeout=5)
            for sock in (client, upstream):
                sock.setblocking(True)
                sock.settimeout(5)
            self._pairs.append((client, upstream))
            self._selector.register(client, selectors.EVENT_READ, upstream)
            self._selector.register(upstream, selectors.EVENT_READ, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            data = source.recv(65536)
            if data:
                sink.sendall(data)
                return
        except OSError:
            pass
        for pair in [p for p in self._pairs if source in p]:
            self._pairs.remove(pair)
            for sock in pair:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(sock)
                sock.close()

