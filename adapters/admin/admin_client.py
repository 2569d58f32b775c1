"""The thin admin-socket client the CLI and the TUI use (stdlib, msgspec and the core only;
requests and answers typed in ``wire``), and the
running engine as a ``CommandSink``."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import quote, urlencode

import msgspec

from nereus.errors import EngineUnreachable, NereusError, NotFound, UsageError

if TYPE_CHECKING:
    from nereus.client import Prepared, Receipt

T = TypeVar("T")

WAIT_MS: Final = 30_000  # how long a --wait lets the engine apply a command


class NotListening(EngineUnreachable):
    """Nothing listens at the socket (no file, or refused): the request was never sent."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = str(path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class AdminClient:
    def __init__(self, path: Path, *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.timeout = timeout

    def _request(self, method: str, url: str, body: msgspec.Struct | None = None,
                 timeout: float | None = None) -> Any:
        conn = _UnixConnection(self.path, timeout or self.timeout)
        try:
            payload = None if body is None else msgspec.json.encode(body)
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            try:
                conn.request(method, url, body=payload, headers=headers)
            except (BrokenPipeError, ConnectionResetError):
                # the server may refuse a request before reading its body (too large): it
                # answered and hung up while we were still sending; read what it said
                if conn.sock is None:
                    raise
            response = conn.getresponse()
            data = response.read()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            if isinstance(exc, FileNotFoundError) and self.path.name == "admin.sock":
                from nereus.adapters.home.home_lock import orphaned_engine, socket_lost

                home = self.path.parent.parent  # <home>/run/admin.sock
                pid = orphaned_engine(home)
                if pid is not None:  # an engine runs, its socket deleted under it
                    raise socket_lost(home, pid) from None
            raise NotListening(
                f"the engine is not running (no answer at {self.path}: {exc.strerror})",
                hint="start it with `nereus engine start`",
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise EngineUnreachable(f"the engine at {self.path} did not answer: {exc}") from None
        finally:
            conn.close()
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            raise EngineUnreachable(f"the engine answered with non-JSON: {data[:80]!r}") from None
        if response.status == 503:
            raise EngineUnreachable(decoded.get("error", "the engine is not serving"),
                                    hint="it is stopping; start it again with `nereus engine "
                                    "start`")
        if response.status == 404:
            raise NotFound(decoded.get("error", "not found"), hint=decoded.get("hint"))
        if response.status in (400, 403):
            raise UsageError(decoded.get("error", "refused"))
        if response.status >= 300:
            raise NereusError(decoded.get("error", f"HTTP {response.status}"),
                              hint=decoded.get("hint"))
        return decoded

    def get(self, path: str, **query: object) -> Any:
        params = {k: v for k, v in query.items() if v is not None}
        url = path + ("?" + urlencode(params) if params else "")
        return self._request("GET", url)

    def post(self, path: str, body: msgspec.Struct, answer: type[T], *,
             timeout: float | None = None) -> T:
        """``POST path`` with the typed request ``body``; the engine's answer as ``answer``
        (an answer that does not fit its type is an engine of another version)."""
        return typed_answer(self._request("POST", path, body, timeout=timeout), answer, path)

    def read(self, path: str, answer: type[T], **query: object) -> T:
        """``GET path`` (with ``query``) as the wire's ``answer`` type."""
        return typed_answer(self.get(path, **query), answer, path)

    def message(self, delay_message_id: str, *, route: str, barrier: bool,
                everywhere: bool = False) -> Any:
        return self.get(f"/v1/messages/{quote(delay_message_id, safe='')}", route=route,
                        barrier="1" if barrier else None,
                        everywhere="1" if everywhere else None)

    def explain(self, delay_message_id: str, *, route: str) -> Any:
        return self.get(f"/v1/explain/{quote(delay_message_id, safe='')}", route=route)

    def feed(self, interval: float = 1.0) -> Generator[Any, None, None]:
        """Status documents (JSON, as ``GET /v1/status`` answers) from the streaming feed, one
        per interval; ``close()`` hangs up."""
        conn = _UnixConnection(self.path, self.timeout)
        try:
            conn.request("GET", f"/v1/feed?interval={interval}")
            response = conn.getresponse()
            while True:
                line = response.readline()
                if not line:
                    return
                yield json.loads(line)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise EngineUnreachable(f"the engine is not running ({exc.strerror})") from None
        finally:
            conn.close()


def typed_answer(decoded: object, answer: type[T], path: str) -> T:
    """An engine's answer to ``path`` as ``answer``: one that does not fit its type is an
    engine of another version, said so with the way out."""
    try:
        return msgspec.convert(decoded, answer)
    except msgspec.ValidationError as exc:
        raise EngineUnreachable(f"the engine's answer to {path} is not what this client "
                                f"reads: {exc}", hint="is the engine of another version? "
                                "restart it with this installation") from None


class EngineSink:
    """The running engine as a ``CommandSink``: ``POST /v1/commands`` appends the records to
    the shards' logs; asked to wait, the engine answers each with its APPLIED result when
    the shard applies it within ``wait_ms`` (else it stays QUEUED)."""

    def __init__(self, client: AdminClient, *, wait_ms: int = WAIT_MS) -> None:
        self.client = client
        self.wait_ms = wait_ms

    def submit(self, prepared: Sequence[Prepared], *, wait: bool) -> list[Receipt]:
        from nereus.adapters.admin.wire import AppendAnswer, AppendRequest, RecordToAppend

        request = AppendRequest(
            records=[RecordToAppend(shard=str(p.shard), data=p.data, kind=p.kind,
                                    command_id=p.command_id,
                                    delay_message_id=p.delay_message_id) for p in prepared],
            wait_ms=self.wait_ms if wait else 0)
        answer = self.client.post("/v1/commands", request, AppendAnswer,
                                  timeout=120 + self.wait_ms / 1000)
        return answer.receipts
