"""What the etcd coordinator says to etcd, and how it reads the answers.

``Gateway`` posts to etcd's gRPC JSON gateway under ``/v3/`` (etcd 3.4 or newer) through
one etcd3gw client per thread. Requests and answers are msgspec Structs because the
gateway's JSON is not what it looks like: 64-bit numbers are JSON strings (read with
``strict=False``), keys and values are base64 (keys the UTF-8 of the Protocol's ``str``),
and proto3 defaults are left out (every such field has its zero default here). A server
that does not answer or cannot serve now is ``CoordinatorUnavailable``; "requested lease
not found" ``LeaseNotFound``; "required revision has been compacted"
``RevisionCompacted``; any other refusal a ``CoordinationError`` with etcd's message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, TypeVar
from urllib.parse import urlsplit

import msgspec
import requests
from etcd3gw import exceptions
from etcd3gw.client import Etcd3Client

from nereus.adapters.backends.coordination.etcd_security import TOKEN_EXPIRED, security_for
from nereus.config.url_credentials import refuse_credentials
from nereus.coordination.errors import CoordinationError, CoordinatorUnavailable
from nereus.errors import UsageError

API_PATH: Final = "/v3/"
DEFAULT_PORT: Final = 2379
CLUSTER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# gRPC codes that mean "not now" rather than "no": deadline exceeded, resource exhausted,
# aborted, unavailable
_TRANSIENT_CODES: Final = frozenset({4, 8, 10, 14})
_UNAVAILABLE_HINT: Final = ("is etcd running and reachable? (`scripts/services up etcd` on "
                            "a test machine)")


# where ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EtcdAddress:
    """One etcd endpoint and the cluster whose keys live under ``/nereus/<cluster>/``."""

    host: str
    port: int
    cluster: str

    @property
    def url(self) -> str:
        """The ``etcd://HOST:PORT/CLUSTER`` form of this address."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"etcd://{host}:{self.port}/{self.cluster}"

    @property
    def endpoint(self) -> str:
        """The server's client URL (what error messages name; https when the node's
        ``[cluster]`` gives TLS settings for it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        security = security_for(self.host, self.port)
        scheme = "https" if security is not None and security.tls else "http"
        return f"{scheme}://{host}:{self.port}"


def parse_etcd_url(url: str) -> EtcdAddress:
    """``etcd://HOST[:PORT]/CLUSTER`` (port 2379 if left out) as an address; a
    ``UsageError`` says what is wrong with any other string (one with a user or password,
    shown redacted)."""
    refuse_credentials(url)
    parts = urlsplit(url)
    example = "etcd://HOST:PORT/CLUSTER, e.g. etcd://127.0.0.1:2379/prod"
    if parts.scheme != "etcd":
        raise UsageError(f"not an etcd coordinator URL: {url!r}", hint=f"write {example}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise UsageError(f"{url!r}: bad port: {exc}", hint=f"write {example}") from exc
    if not parts.hostname:
        raise UsageError(f"{url!r} names no host", hint=f"write {example}")
    cluster = parts.path.removeprefix("/")
    if not CLUSTER_NAME.fullmatch(cluster) or parts.query or parts.fragment:
        raise UsageError(
            f"{url!r}: the cluster name must be one path segment of letters, digits, '.', "
            f"'_' or '-' (at most 100, not starting with a punctuation mark), with no query",
            hint=f"write {example}")
    return EtcdAddress(parts.hostname, port, cluster)


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """Where a cluster's keys are in etcd: records under ``/nereus/<cluster>/keys/``, one
    key per session (its client identity, on the session's lease) under
    ``/nereus/<cluster>/sessions/``. Everything of a cluster is under ``root``."""

    root: str

    @classmethod
    def of(cls, cluster: str) -> KeyLayout:
        return cls(f"/nereus/{cluster}/")

    @property
    def records(self) -> str:
        return self.root + "keys/"

    @property
    def sessions(self) -> str:
        return self.root + "sessions/"

    def record(self, key: str) -> bytes:
        return (self.records + key).encode()

    def key_of(self, raw: bytes) -> str:
        """The Protocol's key of an etcd key under ``records``."""
        return raw.decode().removeprefix(self.records)

    def session(self, lease_id: int) -> bytes:
        return f"{self.sessions}{lease_id:016x}".encode()


# requests ---------------------------------------------------------------------------------
class Compare(msgspec.Struct, frozen=True, omit_defaults=True):
    """One compare of a transaction: ``target`` (MOD, CREATE, VERSION) ``result`` value."""

    key: bytes
    target: str
    result: str = "EQUAL"
    mod_revision: int | None = None
    create_revision: int | None = None
    version: int | None = None


class RangeRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    key: bytes
    range_end: bytes = b""  # empty: the one key
    keys_only: bool = False
    revision: int = 0  # 0: the newest


class PutRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    key: bytes
    value: bytes
    lease: int = 0  # 0: no lease (a put without one also detaches the key from its lease)
    prev_kv: bool = False


class DeleteRangeRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    key: bytes
    range_end: bytes = b""


class RequestOp(msgspec.Struct, frozen=True, omit_defaults=True):
    """One operation of a transaction (exactly one field set)."""

    request_range: RangeRequest | None = None
    request_put: PutRequest | None = None
    request_delete_range: DeleteRangeRequest | None = None


class TxnRequest(msgspec.Struct, frozen=True):
    compare: list[Compare]
    success: list[RequestOp]
    failure: list[RequestOp]


# answers ----------------------------------------------------------------------------------
class Header(msgspec.Struct, frozen=True):
    revision: int = 0  # the store's revision when the request was served


class KeyValue(msgspec.Struct, frozen=True):
    key: bytes
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0  # puts since the key was (re)created, the first one included
    value: bytes = b""
    lease: int = 0


class Acknowledged(msgspec.Struct, frozen=True):
    header: Header = Header()


class RangeResponse(msgspec.Struct, frozen=True):
    header: Header = Header()
    kvs: list[KeyValue] = []
    more: bool = False


class PutResponse(msgspec.Struct, frozen=True):
    header: Header = Header()
    prev_kv: KeyValue | None = None


class DeleteRangeResponse(msgspec.Struct, frozen=True):
    header: Header = Header()
    deleted: int = 0


class ResponseOp(msgspec.Struct, frozen=True):
    response_range: RangeResponse | None = None
    response_put: PutResponse | None = None
    response_delete_range: DeleteRangeResponse | None = None


class TxnResponse(msgspec.Struct, frozen=True):
    header: Header = Header()
    succeeded: bool = False
    responses: list[ResponseOp] = []


class LeaseGrantResponse(msgspec.Struct, frozen=True, rename={"lease_id": "ID", "ttl_s": "TTL"}):
    lease_id: int = 0
    ttl_s: int = 0
    error: str = ""


class KeepAliveResult(msgspec.Struct, frozen=True, rename={"ttl_s": "TTL"}):
    ttl_s: int = 0  # absent (0) when the lease is gone


class TimeToLiveResponse(msgspec.Struct, frozen=True,
                         rename={"ttl_s": "TTL", "granted_ttl_s": "grantedTTL"}):
    ttl_s: int = -1  # -1 when the lease is gone
    granted_ttl_s: int = 0


class KeepAliveResponse(msgspec.Struct, frozen=True):
    result: KeepAliveResult = KeepAliveResult()


class GatewayError(msgspec.Struct, frozen=True):
    """The body of a refused request."""

    message: str = ""
    code: int = 0  # the gRPC status code


class LeaseNotFound(CoordinationError):
    """etcd has no lease with that id (expired, revoked, or never granted)."""


class CoordinatorRefused(CoordinatorUnavailable):
    """etcd refused our user or password: nothing to wait for, the settings are wrong."""


class RevisionCompacted(CoordinationError):
    """A read or watch asked for a revision etcd has compacted away."""


Answer = TypeVar("Answer", bound=msgspec.Struct)


class Gateway:
    """Unary calls to one etcd server, each bounded by ``timeout_s``. Not thread-safe:
    one per thread, or used under its owner's lock."""

    def __init__(self, address: EtcdAddress, *, timeout_s: float) -> None:
        self._address = address
        self._security = security_for(address.host, address.port)
        secured = self._security is not None and self._security.tls
        self._client = Etcd3Client(
            host=address.host, port=address.port, protocol="https" if secured else "http",
            timeout=timeout_s, api_path=API_PATH,
            session=None if self._security is None
            else self._security.session(f"etcd at {address.endpoint}"))
        self._token: str | None = None  # etcd's auth token, asked for by the first call

    def range(self, request: RangeRequest) -> RangeResponse:
        return self._call("/kv/range", request, RangeResponse, "a read")

    def txn(self, request: TxnRequest) -> TxnResponse:
        return self._call("/kv/txn", request, TxnResponse, "a transaction")

    def delete_range(self, request: DeleteRangeRequest) -> DeleteRangeResponse:
        return self._call("/kv/deleterange", request, DeleteRangeResponse, "a delete")

    def grant(self, ttl_s: int) -> LeaseGrantResponse:
        return self._call("/lease/grant", {"TTL": ttl_s}, LeaseGrantResponse, "a lease grant")

    def keep_alive(self, lease_id: int) -> int:
        """The TTL (s) the lease has again, or 0 if it is gone."""
        answer = self._call("/lease/keepalive", {"ID": lease_id}, KeepAliveResponse,
                            "a lease keep-alive")
        return answer.result.ttl_s

    def time_to_live(self, lease_id: int) -> tuple[int, int]:
        """The lease's seconds left (-1 if it is gone) and the TTL it was granted."""
        answer = self._call("/kv/lease/timetolive", {"ID": lease_id}, TimeToLiveResponse,
                            "a lease's time to live")
        return answer.ttl_s, answer.granted_ttl_s

    def revoke(self, lease_id: int) -> bool:
        """Revoke the lease (its keys go now); False if it was already gone."""
        try:
            self._call("/kv/lease/revoke", {"ID": lease_id}, Acknowledged, "a lease revoke")
        except LeaseNotFound:
            return False
        return True

    def close(self) -> None:
        self._client.session.close()

    def _call(self, path: str, request: msgspec.Struct | dict[str, int], answer: type[Answer],
              what: str) -> Answer:
        body = msgspec.to_builtins(request)
        try:
            raw = self._post(path, body, what)
        except exceptions.Etcd3Exception as exc:
            if not any(text in (exc.detail_text or "") for text in TOKEN_EXPIRED) \
                    or self._security is None or self._security.username is None:
                raise self._refused(what, exc) from exc
            self._token = None  # etcd forgot our token (a restart, its TTL): ask again
            try:
                raw = self._post(path, body, what)
            except exceptions.Etcd3Exception as again:
                raise self._refused(what, again) from again
        try:
            return msgspec.convert(raw, answer, strict=False)
        except msgspec.ValidationError as exc:
            raise CoordinationError(f"etcd at {self._address.endpoint} answered {what} with "
                                    f"something unexpected: {exc}: {raw!r}") from exc

    def _post(self, path: str, body: object, what: str) -> object:
        """POST ``body``, authenticated when the node's [cluster] names a user."""
        try:
            headers = {} if self._security is None or self._security.username is None \
                else {"Authorization": self._authenticate()}
            return self._client.post(self._client.get_url(path), json=body, headers=headers)
        except (exceptions.ConnectionFailedError, exceptions.ConnectionTimeoutError,
                requests.RequestException, ValueError, OSError) as exc:
            raise self.unavailable(what, exc) from exc

    def token(self) -> str:
        """etcd's auth token for the [cluster] user (for a watch stream's header)."""
        return self._authenticate()

    def _authenticate(self) -> str:
        """etcd's token for the [cluster] user (one ``/v3/auth/authenticate``, then kept)."""
        if self._token is not None:
            return self._token
        assert self._security is not None and self._security.username is not None
        try:
            answer = self._client.post(self._client.get_url("/auth/authenticate"), json={
                "name": self._security.username, "password": self._security.password()})
        except (exceptions.ConnectionFailedError, exceptions.ConnectionTimeoutError):
            raise  # no answer: said by the caller (_post) as unavailable
        except exceptions.Etcd3Exception as exc:
            refused = self._refused("authentication", exc)
            raise CoordinatorRefused(
                f"{refused.message} (user {self._security.username})",
                hint="check [cluster] username and the password its password_file (or "
                     "password_env) gives; the user needs read-write on /nereus/") from exc
        self._token = str(answer.get("token", ""))
        return self._token
    def unavailable(self, what: str, exc: BaseException) -> CoordinatorUnavailable:
        detail = getattr(exc, "detail_text", None) or str(exc) or type(exc).__name__
        hint = _UNAVAILABLE_HINT
        if any(word in detail.upper() for word in ("CERTIFICATE", "SSL", "TLS")):  # a file too
            hint = ("check [cluster] tls_ca_file (the CA of etcd's certificate), tls_cert_file "
                    "and tls_key_file (the client certificate etcd requires) and that the "
                    "certificates have not expired")
        return CoordinatorUnavailable(f"etcd at {self._address.endpoint}: {what} failed: "
                                      f"{detail}", hint=hint)

    def _refused(self, what: str, exc: exceptions.Etcd3Exception) -> CoordinationError:
        try:
            error = msgspec.json.decode(exc.detail_text or "{}", type=GatewayError)
        except msgspec.DecodeError:
            error = GatewayError(message=exc.detail_text or str(exc))
        where = f"etcd at {self._address.endpoint}"
        if "requested lease not found" in error.message:
            return LeaseNotFound(f"{where}: {what}: {error.message}")
        if "required revision has been compacted" in error.message:
            return RevisionCompacted(f"{where}: {what}: {error.message}")
        if error.code in _TRANSIENT_CODES:
            return CoordinatorUnavailable(f"{where}: {what} failed: {error.message}",
                                          hint=_UNAVAILABLE_HINT)
        return CoordinationError(f"{where} refused {what}: {error.message or exc.args}")
