"""The engine's admin socket, spoken to directly: HTTP/1.1 + JSON over ``run/admin.sock``.

One engine serves the whole module, started with the installed ``nereus`` on a fresh home.
The home lives in a directory other users may traverse (mode 0755), so that the only thing
keeping another user out is the socket itself: its 0600 mode, and behind it the peer
credential check this module proves by connecting as ``nobody``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.admin.admin_client import AdminClient
from nereus.errors import EngineUnreachable, NereusError
from tests.conftest import run_nereus
from tests.daemon import running_engine

STATUS_REQUEST = b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
STATUS_LINE = re.compile(rb"^HTTP/1\.[01] (\d{3}) ")


class Response:
    def __init__(self, raw: bytes) -> None:
        head, sep, self.body = raw.partition(b"\r\n\r\n")
        assert sep, f"no HTTP head in the answer: {raw[:200]!r}"
        status_line, *header_lines = head.split(b"\r\n")
        match = STATUS_LINE.match(status_line)
        assert match, f"no status line in the answer: {raw[:200]!r}"
        self.status = int(match.group(1))
        self.headers = {}
        for line in header_lines:
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json"
        assert int(self.headers["content-length"]) == len(self.body)
        return json.loads(self.body)


def exchange(path: Path, request: bytes, timeout: float = 10.0) -> Response:
    """Send raw bytes, close our sending side, and read the whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return Response(b"".join(chunks))


def assert_serving(path: Path) -> None:
    answer = exchange(path, STATUS_REQUEST)
    assert answer.status == 200
    assert answer.json()["running"] is True


@pytest.fixture(scope="module")
def sock() -> Iterator[Path]:
    """The admin socket of an engine on a fresh home, for the whole module."""
    root = Path(tempfile.mkdtemp(prefix="nereus-admin-"))
    try:
        root.chmod(0o755)
        home = root / "home"
        result = run_nereus("init", "--partitions", "2", home=home)
        assert result.code == 0, result.stderr
        with running_engine(home):
            yield home / "run" / "admin.sock"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_socket_is_private_and_speaks_http(sock: Path) -> None:
    """The socket has mode 0600 and answers GET /v1/status like curl --unix-socket would."""
    info = sock.lstat()
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    answer = exchange(sock, STATUS_REQUEST)
    assert answer.status == 200
    data = answer.json()
    assert data["running"] is True
    assert [s["shard"] for s in data["shards"]] == ["default/0", "default/1"]
    assert data["home"] == str(sock.parent.parent)


def _post(path: str, body: bytes, content_length: str | None = None) -> bytes:
    length = str(len(body)) if content_length is None else content_length
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n").encode() + body


BAD_REQUESTS: dict[str, tuple[bytes, int]] = {
    "tls-hello": (bytes.fromhex("160301020001000001fc0303") + bytes(range(11, 64)), 400),
    "binary-garbage": (b"\x00\xff\xfe\x80" * 32 + b"\r\n\r\n", 400),
    "request-line-one-word": (b"GET\r\n\r\n", 400),
    "request-line-bad-version": (b"GET /v1/status HTTP/1.1 extra\r\n\r\n", 400),
    "request-line-not-http": (b"HELLO THERE FRIEND\r\n\r\n", 400),
    "post-not-json": (_post("/v1/commands", b"hello, engine"), 400),
    "post-json-not-object": (_post("/v1/commands", b"[1, 2, 3]"), 400),
    "post-bad-content-length": (_post("/v1/commands", b"{}", content_length="lots"), 400),
    "post-records-not-base64": (
        _post("/v1/commands", b'{"records": [{"shard": "default/0", "data": "!!"}]}'), 400),
    "get-bad-limit": (b"GET /v1/messages?limit=many HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "get-unknown-path": (b"GET /v1/nothing-here HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    "post-unknown-path": (_post("/v2/commands", b"{}"), 404),
    "get-unknown-message": (b"GET /v1/messages/no-such-id HTTP/1.1\r\nHost: x\r\n\r\n", 404),
}


@pytest.mark.parametrize(("request_bytes", "expected"), list(BAD_REQUESTS.values()),
                         ids=list(BAD_REQUESTS))
def test_bad_requests_get_a_4xx_json_error_and_the_daemon_keeps_serving(
    sock: Path, request_bytes: bytes, expected: int,
) -> None:
    """Garbage, a malformed request line, a non-JSON body, an unknown path: a 4xx JSON error."""
    answer = exchange(sock, request_bytes)
    assert answer.status == expected
    assert 400 <= answer.status < 500
    body = answer.json()
    assert isinstance(body, dict) and body["error"]
    assert_serving(sock)


def test_a_silent_client_does_not_block_others(sock: Path) -> None:
    """A connection that sends nothing holds only its own thread; status still answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.connect(str(sock))
        idle.sendall(b"GET /v1/sta")
        started = time.monotonic()
        assert_serving(sock)
        assert time.monotonic() - started < 5


NOBODY_CLIENT = """
import socket, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
    sock.settimeout(10)
    sock.connect(sys.argv[1])
    sock.sendall(b"GET /v1/status HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n")
    sock.shutdown(socket.SHUT_WR)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
sys.stdout.buffer.write(data)
"""


def _runnable_by_others(path: Path) -> bool:
    """Every directory on the way is searchable by others, and the file executable."""
    real = Path(os.path.realpath(path))
    if not real.is_file() or not real.stat().st_mode & stat.S_IXOTH:
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)


def _python_for_others() -> str | None:
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists() and _runnable_by_others(Path(candidate)):
            return candidate
    return None


def test_another_user_is_refused_with_403(sock: Path) -> None:
    """Even with the socket opened to all (0666), a peer that is not the owner gets 403.
    (Before that, the home's 0700 keeps other users from reaching the socket at all.)"""
    if os.getuid() != 0:
        pytest.skip("needs root to run a client as another user")
    python = _python_for_others()
    if python is None:
        pytest.skip("no Python interpreter that user nobody may run")
    nobody = pwd.getpwnam("nobody")

    def become_nobody() -> None:
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    # the home is private (0700): open the way to the socket too, as a careless operator
    # might, so that the socket's own check is what refuses
    passage = [sock.parent, sock.parent.parent]
    modes = [stat.S_IMODE(path.stat().st_mode) for path in passage]
    sock.chmod(0o666)
    for path in passage:
        path.chmod(0o711)
    try:
        client = subprocess.run(
            [python, "-I", "-c", NOBODY_CLIENT, str(sock)], preexec_fn=become_nobody,
            capture_output=True, cwd="/", env={"PATH": "/usr/bin:/bin"}, timeout=30,
            check=False,
        )
    finally:
        sock.chmod(0o600)
        for path, mode in zip(passage, modes, strict=True):
            path.chmod(mode)
    assert client.returncode == 0, client.stderr.decode()
    answer = Response(client.stdout)
    assert answer.status == 403
    assert f"uid {nobody.pw_uid}" in answer.json()["error"]
    assert stat.S_IMODE(sock.lstat().st_mode) == 0o600
    assert_serving(sock)


def test_feed_streams_status_documents(sock: Path) -> None:
    """GET /v1/feed yields one JSON status document per interval: two within ~2.5 s."""
    client = AdminClient(sock, timeout=5)
    started = time.monotonic()
    documents: list[dict[str, Any]] = []
    feed = client.feed(interval=1.0)
    try:
        for document in feed:
            documents.append(document)
            if len(documents) >= 2:
                break
    finally:
        feed.close()
    elapsed = time.monotonic() - started
    assert len(documents) == 2
    assert elapsed < 2.5, f"two feed documents took {elapsed:.2f} s"
    for document in documents:
        assert document["running"] is True
        assert [s["shard"] for s in document["shards"]] == ["default/0", "default/1"]
        assert document["lanes"][0]["lane"] == "local"
    assert_serving(sock)


def test_requests_during_stop_are_answered_or_refused_never_failed(home: Path) -> None:
    """While the engine stops, status polls get answers or 'unreachable', never a 500, and
    an open feed ends cleanly: the socket closes before the shard stores do."""
    with running_engine(home):
        client = AdminClient(home / "run" / "admin.sock", timeout=5)
        answered = [0]
        failures: list[str] = []
        feed_documents: list[dict[str, Any]] = []
        polling = threading.Event()

        def poll() -> None:
            while True:
                try:
                    client.get("/v1/status")
                except EngineUnreachable:
                    return
                except NereusError as exc:
                    failures.append(f"status: {exc.message}")
                    return
                answered[0] += 1
                polling.set()

        def feed() -> None:
            try:
                feed_documents.extend(client.feed(interval=0.1))
            except Exception as exc:
                failures.append(f"feed: {exc!r}")

        threads = [threading.Thread(target=poll, daemon=True),
                   threading.Thread(target=feed, daemon=True)]
        for thread in threads:
            thread.start()
        assert polling.wait(10)
        stopped = run_nereus("engine", "stop", home=home)
        assert stopped.code == 0, stopped.stderr
        for thread in threads:
            thread.join(10)
            assert not thread.is_alive()
    assert failures == []
    assert answered[0] > 0 and feed_documents
