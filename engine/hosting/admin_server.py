"""The admin socket server: HTTP/1.1 + JSON over a Unix socket, like the Docker daemon.

The socket is created 0600 (the umask tightened around ``bind``: no wider window) and every
connection's peer credentials (SO_PEERCRED) are checked: only the daemon's user and root
are served, anyone else gets 403. A malformed request is a 4xx JSON error and a handler's
exception a 500 for that request only: nothing a client sends stops the daemon.
``GET /v1/feed`` streams a status document per line at least once a second. ``close()``
waits for requests in progress, so the stores close with no admin thread reading them;
later requests get 503. Endpoints: ``GET /v1/status``, ``/v1/shards``, ``/v1/lanes``,
``/v1/metrics``, ``/v1/messages[/<id>]``, ``/v1/attempts``, ``/v1/commands/<id>``,
``/v1/feed``; ``POST /v1/commands``, ``/v1/mutations/plan``, ``/v1/checkpoints``,
``/v1/shutdown`` (``curl --unix-socket <home>/run/admin.sock http://x/v1/status`` works).
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import struct
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import msgspec

from nereus.adapters.admin.wire import (
    AppendRequest,
    CheckpointRequest,
    PlanRequest,
    Stopping,
    request_of,
)
from nereus.adapters.home.home_lock import mark_stopping, remove_if_ours, remove_stopping_marker
from nereus.engine.admin import params
from nereus.engine.admin.endpoints import AdminEndpoints
from nereus.engine.runtime.supervisor import Supervised, Supervisor, stop_serving
from nereus.errors import NereusError, NotFound, UsageError

MAX_BODY = 64 << 20
DRAIN_TIMEOUT_S = 10.0


def peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True
    api: AdminEndpoints
    on_shutdown: Callable[[], None]
    stopping: threading.Event
    in_flight: int
    idle: threading.Condition

    def enter(self) -> bool:
        """Count a request in, unless the server is stopping."""
        with self.idle:
            if self.stopping.is_set():
                return False
            self.in_flight += 1
            return True

    def leave(self) -> None:
        with self.idle:
            self.in_flight -= 1
            self.idle.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until no request is in progress (feeds end once ``stopping`` is set)."""
        with self.idle:
            return self.idle.wait_for(lambda: self.in_flight == 0, timeout)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "nereus-admin/1"
    timeout = 60

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are not logged line by line; the engine log has the events

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        # A request line that does not parse leaves request_version at the HTTP/0.9
        # default, and BaseHTTPRequestHandler then writes neither status line nor headers:
        # the client would get a bare body. Answer such errors in HTTP/1.1 and close.
        if self.request_version == "HTTP/0.9":
            self.request_version = self.protocol_version
            self.close_connection = True
        self._json(code, {"error": message or "bad request", "detail": explain})

    def _json(self, code: int, body: Any) -> None:
        data = (json.dumps(body, default=str) + "\n").encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _allowed(self) -> bool:
        uid = peer_uid(self.connection)
        if uid in (os.getuid(), 0):
            return True
        self._json(403, {"error": f"uid {uid} may not use this engine's admin socket"})
        self.close_connection = True
        return False

    def _body(self) -> dict[str, object]:
        """The request's JSON object (a request type then takes its fields from it)."""
        text = self.headers.get("Content-Length") or "0"
        if not text.strip().isdigit():
            raise UsageError(f"Content-Length {text!r} is not a byte count")
        length = int(text)
        if length > MAX_BODY:
            self.close_connection = True  # the body stays unread: answer, then hang up
            raise UsageError(f"the request body is {length} bytes, over the admin socket's "
                             f"limit of {MAX_BODY} bytes ({MAX_BODY >> 20} MiB)")
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise UsageError("request body must be a JSON object")
        return body

    def _dispatch(self, method: str) -> None:
        if not self._allowed():
            return
        if not self.server.enter():
            self._json(503, {"error": "the engine is stopping"})
            self.close_connection = True
            return
        try:
            self._serve(method)
        finally:
            self.server.leave()

    def _serve(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        api = self.server.api
        try:
            if method == "GET" and url.path == "/v1/feed":
                self._feed(params.number(query.get("interval"), "interval", low=0.1,
                                         high=60.0, default=1.0))
                return
            body = self._route(method, url.path, query, api)
        except NotFound as exc:
            self._json(404, {"error": exc.message, "hint": exc.hint})
        except (UsageError, ValueError) as exc:
            message = exc.message if isinstance(exc, NereusError) else str(exc)
            self._json(400, {"error": message})
        except NereusError as exc:
            self._json(409, {"error": exc.message, "hint": exc.hint})
        except Exception as exc:
            self._json(500, {"error": f"{type(exc).__name__}: {exc}"})
        else:
            self._json(200, body)

    def _route(self, method: str, path: str, query: dict[str, str],
               api: AdminEndpoints) -> Any:
        if method == "GET":
            if path == "/v1/status":
                return msgspec.to_builtins(api.status())
            if path == "/v1/shards":
                return {"shards": msgspec.to_builtins(api.shards())}
            if path == "/v1/lanes":
                return {"lanes": msgspec.to_builtins(api.lanes())}
            if path == "/v1/metrics":
                return msgspec.to_builtins(api.metrics())
            if path == "/v1/attempts":
                limit = query.get("limit")
                return {"attempts": msgspec.to_builtins(api.attempts(
                    shard=query.get("shard"), state=query.get("state"),
                    limit=None if limit is None else params.integer(
                        limit, "limit", low=1, high=1_000_000, default=1)))}
            if path == "/v1/messages":
                return msgspec.to_builtins(api.messages(
                    shard=query.get("shard"), state=query.get("state"),
                    lane=query.get("lane"), after=query.get("after"),
                    limit=params.integer(query.get("limit"), "limit", low=1, high=100_000,
                                         default=100)))
            if path.startswith("/v1/commands/"):
                return msgspec.to_builtins(api.command(unquote(path[len("/v1/commands/"):])))
            if path.startswith("/v1/explain/"):
                return msgspec.to_builtins(api.explain(
                    unquote(path[len("/v1/explain/"):]), route=query.get("route", "default")))
            if path.startswith("/v1/messages/"):
                return msgspec.to_builtins(api.message(
                    unquote(path[len("/v1/messages/"):]), route=query.get("route", "default"),
                    barrier=query.get("barrier") in ("1", "true"),
                    everywhere=query.get("everywhere") in ("1", "true")))
        elif method == "POST":
            if path == "/v1/commands":
                return msgspec.to_builtins(api.submit(request_of(self._body(), AppendRequest)))
            if path == "/v1/mutations/plan":
                return msgspec.to_builtins(api.plan_mutation(
                    request_of(self._body(), PlanRequest)))
            if path == "/v1/checkpoints":
                return msgspec.to_builtins(api.checkpoint(
                    request_of(self._body(), CheckpointRequest)))
            if path == "/v1/shutdown":
                threading.Thread(target=self.server.on_shutdown, daemon=True).start()
                return msgspec.to_builtins(Stopping(stopping=True))
        raise NotFound(f"no endpoint {method} {path}")

    def _feed(self, interval: float) -> None:
        interval = min(interval, 1.0)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while not self.server.stopping.is_set():
                line = msgspec.json.encode(self.server.api.status()) + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
                self.server.stopping.wait(interval)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")


class AdminServer:
    def __init__(self, api: AdminEndpoints, path: Path, *, on_shutdown: Callable[[], None]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()
        remove_stopping_marker(self.path.parent)  # a previous engine's, killed while stopping
        old = os.umask(0o177)
        try:
            self._server = _Server(str(self.path), _Handler)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._made = os.stat(self.path)  # what close() may remove: this socket, no other
        self._server.api = api
        self._server.on_shutdown = on_shutdown
        self._server.stopping = threading.Event()
        self._server.in_flight = 0
        self._server.idle = threading.Condition()
        self._closed = False
        self._worker: Supervised | None = None

    def start(self, supervisor: Supervisor | None = None) -> None:
        """Serve on a thread owned by ``supervisor`` (the accept loop restarts on a crash)."""
        owner = supervisor if supervisor is not None else Supervisor()
        self._worker = owner.spawn("admin-socket", "admin", self._serve)

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.2)

    def close(self) -> bool:
        """Stop serving and wait for requests in progress; False if some did not finish.
        The first call leaves a marker that the engine is stopping (a command that finds
        no socket says so, not "deleted under it"); a second call, once the engine has
        stopped its shards, removes the marker."""
        if self._closed:
            remove_stopping_marker(self.path.parent)
            return True
        self._closed = True
        mark_stopping(self.path.parent)
        with self._server.idle:
            self._server.stopping.set()
        stop_serving(self._server, self._worker)
        remove_if_ours(self.path, self._made)  # never a socket another process made since
        return self._server.drain(DRAIN_TIMEOUT_S)
