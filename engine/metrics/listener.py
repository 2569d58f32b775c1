"""``[metrics] listen``: GET /metrics over HTTP for Prometheus to scrape.

Opt-in (no listener unless ``listen`` is set) and served by the daemon that owns the home's
admin socket: the single engine, or the front door of ``--workers N`` (whose exposition
merges its workers'). The accept loop runs as the supervised worker ``metrics-http``;
each request is answered on its own thread from ``exposition()``, so a slow scrape never
holds up the shard loops. Anything but ``GET /metrics`` (and ``/``, a pointer to it) is
404; an exposition that fails is a 500 with the error, never a stopped daemon.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from nereus.engine.runtime.supervisor import Supervised, Supervisor, stop_serving

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    exposition: Callable[[], str]


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "nereus-metrics/1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape a second would flood the log

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/":
            self._send(200, "text/html; charset=utf-8",
                       b'<a href="/metrics">/metrics</a>\n')
            return
        if path != "/metrics":
            self._send(404, "text/plain; charset=utf-8", b"only GET /metrics\n")
            return
        try:
            body = self.server.exposition().encode()
        except Exception as exc:  # the daemon goes on; Prometheus marks the scrape down
            self._send(500, "text/plain; charset=utf-8",
                       f"{type(exc).__name__}: {exc}\n".encode())
            return
        self._send(200, CONTENT_TYPE, body)

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True


class MetricsListener:
    """An HTTP listener on ``address`` serving ``exposition()`` at ``/metrics``."""

    def __init__(self, address: tuple[str, int], exposition: Callable[[], str]) -> None:
        kind = _V6Server if ":" in address[0] else _Server
        self._server = kind(address, _Handler)
        self._server.exposition = exposition
        self._worker: Supervised | None = None
        self._closed = False

    @property
    def port(self) -> int:
        """The port it listens on (the one asked for, or the one given for port 0)."""
        return int(self._server.server_address[1])

    def start(self, supervisor: Supervisor) -> None:
        self._worker = supervisor.spawn("metrics-http", "metrics", self._serve)

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.2)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        stop_serving(self._server, self._worker)


def open_listener(address: tuple[str, int] | None, exposition: Callable[[], str],
                  supervisor: Supervisor) -> MetricsListener | None:
    """The listener ``[metrics] listen`` asks for, started (None when it is not set)."""
    if address is None:
        return None
    try:
        listener = MetricsListener(address, exposition)
    except OSError as exc:
        from nereus.errors import ConfigError

        raise ConfigError(f"[metrics] listen: cannot listen on {address[0]}:{address[1]}: "
                          f"{exc.strerror or exc}",
                          hint="choose a free port, or remove [metrics] listen") from None
    listener.start(supervisor)
    return listener
