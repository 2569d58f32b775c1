"""What the Oxia coordinator says to Oxia over gRPC, and how it reads the answers.

The messages are generated at install time from Oxia's ``proto/client.proto``
(``docs/decisions/0001-oxia-client.md``); the ``OxiaClient`` methods are called by name on
one channel per server, over TLS when the node's ``[cluster]`` says so (``oxia_security``).
Every call has a deadline (``timeout_s``); the notification stream is watched by keep-alives
instead (10 s ping, 5 s answer, as Oxia permits). A cluster's
shard is found from ``GetShardAssignments`` by the xxh3 hash of its partition key, and asked
again after its leader refused. Writes use the unary ``Write``. Failures: unreachable,
late or not serving now is ``CoordinatorUnavailable``; an unknown session (code 108, or
"session not found") ``UnknownSession``; any other refusal ``CoordinationError``. No
``grpc.RpcError`` leaves this module.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, TypeVar

from nereus.adapters.backends.coordination.oxia_keys import OxiaAddress
from nereus.adapters.backends.coordination.oxia_security import security_for, tls_failure
from nereus.coordination.errors import CoordinationError, CoordinatorUnavailable

if TYPE_CHECKING:
    import nereus.adapters.backends.coordination.oxia_proto.client_pb2 as pb

SERVICE: Final = "/io.streamnative.oxia.proto.OxiaClient/"
CHANNEL_OPTIONS: Final = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # a restarted server is dialled again within a second, not gRPC's default 20 s backoff
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
)
# Oxia's own status codes (common/constant/grpc_errors.go)
CODE_NOT_INITIALIZED: Final = 100
CODE_INVALID_STATUS: Final = 102
CODE_ALREADY_CLOSED: Final = 104
CODE_NOT_LEADER: Final = 106
CODE_SESSION_NOT_FOUND: Final = 108
CODE_NAMESPACE_NOT_FOUND: Final = 110
_NOT_NOW_CODES: Final = frozenset({CODE_NOT_INITIALIZED, CODE_INVALID_STATUS,
                                   CODE_ALREADY_CLOSED, CODE_NOT_LEADER})
_NOT_NOW_TEXTS: Final = ("node is not leader", "server not initialized", "invalid status",
                         "already closed")
_UNAVAILABLE_HINT: Final = ("is Oxia running and reachable? (`scripts/services up oxia` on a "
                            "test machine)")

T = TypeVar("T")


class UnknownSession(CoordinationError):
    """Oxia does not know the session (it expired or was closed)."""


class StubsMissing(CoordinationError):
    """The messages generated from Oxia's proto are not there."""


def messages() -> Any:
    """The generated module (``pb``), or ``StubsMissing`` saying how to make it."""
    try:
        return importlib.import_module(
            "nereus.adapters.backends.coordination.oxia_proto.client_pb2")
    except ImportError as exc:
        raise StubsMissing(
            f"the Oxia client's messages are not generated ({exc})",
            hint="run `make install` (it runs scripts/gen-oxia-proto, which needs Go or "
                 "Oxia's proto in the Go module cache)") from exc


def quiet_grpc() -> None:
    """gRPC's C core writes its own lines on stderr when TLS fails ("E1205 ...
    ssl_transport_security ... Corruption detected"), beside, and before, the error raised
    here that names the connection and the setting to check. They are turned off unless
    the operator asks for them (``GRPC_VERBOSITY=ERROR``); read once, before gRPC starts."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")


class OxiaWire:
    """The gRPC calls of one cluster's coordinator (see the module's docstring)."""

    def __init__(self, address: OxiaAddress, *, timeout_s: float) -> None:
        quiet_grpc()
        import grpc

        self._grpc: Any = grpc
        self.pb: Any = messages()
        self.address = address
        self.timeout_s = timeout_s
        # TLS for every server of this Oxia cluster when the node's [cluster] says so
        self._security = security_for(address.host, address.port)
        self._credentials: Any = None
        self._lock = threading.Lock()  # guards the channels and the shard
        self._channels: dict[str, Any] = {}
        self._shard: tuple[int, str] | None = None  # (shard id, its leader's target)
        self._closed = False

    # where ------------------------------------------------------------------------------
    def _channel(self, target: str) -> Any:
        with self._lock:
            if self._closed:
                raise CoordinationError(f"the Oxia coordinator of {self.address.url} is closed")
            channel = self._channels.get(target)
            if channel is None:
                channel = self._dial(target)
                self._channels[target] = channel
            return channel

    def _dial(self, target: str) -> Any:
        if self._security is None:
            return self._grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        if self._credentials is None:
            self._credentials = self._security.credentials(
                self._grpc, f"Oxia at {self.address.target}")
        return self._grpc.secure_channel(target, self._credentials, options=CHANNEL_OPTIONS)

    def shard(self) -> tuple[int, str]:
        """The cluster's shard and its leader's ``HOST:PORT`` (asked once, then kept)."""
        with self._lock:
            if self._shard is not None:
                return self._shard
        found = self._find_shard()
        with self._lock:
            self._shard = found
        return found

    def forget_shard(self) -> None:
        """Ask the shard assignments again before the next call (the leader moved)."""
        with self._lock:
            self._shard = None

    def _find_shard(self) -> tuple[int, str]:
        from xxhash import xxh3_64_intdigest

        pb = self.pb
        stream = self._stream_method(self.address.target, "GetShardAssignments",
                                     pb.ShardAssignmentsRequest, pb.ShardAssignments)
        call = stream(pb.ShardAssignmentsRequest(namespace=self.address.namespace),
                      timeout=self.timeout_s)
        try:
            first = self._guard("GetShardAssignments", lambda: next(iter(call)))
        except StopIteration:
            raise CoordinatorUnavailable(
                f"Oxia at {self.address.target} ended the shard assignments without any",
                hint=_UNAVAILABLE_HINT) from None
        finally:
            call.cancel()
        namespace = first.namespaces.get(self.address.namespace)
        if namespace is None or not namespace.assignments:
            raise CoordinationError(
                f"Oxia at {self.address.target} has no namespace {self.address.namespace!r}",
                hint="name one the Oxia cluster has (a standalone server has only `default`)")
        hashed = xxh3_64_intdigest(self.address.partition_key.encode()) & 0xFFFF_FFFF
        for assignment in namespace.assignments:
            bounds = assignment.int32_hash_range
            if bounds.min_hash_inclusive <= hashed <= bounds.max_hash_inclusive:
                leader = assignment.leader
                if not leader or leader.startswith(("0.0.0.0:", "[::]:")):
                    leader = self.address.target
                return int(assignment.shard), str(leader)
        raise CoordinationError(f"no shard of Oxia namespace {self.address.namespace!r} at "
                                f"{self.address.target} holds hash {hashed:#010x}")

    # calls ------------------------------------------------------------------------------
    def _unary_method(self, target: str, name: str, request: Any, answer: Any) -> Any:
        return self._channel(target).unary_unary(
            SERVICE + name, request_serializer=request.SerializeToString,
            response_deserializer=answer.FromString)

    def _stream_method(self, target: str, name: str, request: Any, answer: Any) -> Any:
        return self._channel(target).unary_stream(
            SERVICE + name, request_serializer=request.SerializeToString,
            response_deserializer=answer.FromString)

    def _metadata(self, shard: int) -> tuple[tuple[str, str], ...]:
        return (("namespace", self.address.namespace), ("shard-id", str(shard)))

    def unary(self, name: str, request: Any, answer: Any, build: Callable[[int], Any]) -> Any:
        """One unary call to the cluster's shard leader: ``build(shard)`` makes the
        request message."""
        shard, target = self.shard()
        method = self._unary_method(target, name, request, answer)
        return self._guard(name, lambda: method(build(shard), timeout=self.timeout_s,
                                                metadata=self._metadata(shard)))

    def streamed(self, name: str, request: Any, answer: Any,
                 build: Callable[[int], Any]) -> list[Any]:
        """Every answer of one bounded server-streaming call (List, RangeScan, Read), all
        within one deadline."""
        shard, target = self.shard()
        method = self._stream_method(target, name, request, answer)
        return self._guard(name, lambda: list(method(build(shard), timeout=self.timeout_s,
                                                     metadata=self._metadata(shard))))

    def subscribe(self, start_offset_exclusive: int | None) -> Any:
        """The notification stream of the cluster's shard (a gRPC call: iterate it, and
        ``cancel()`` it to end it), from after that offset (None: from now, after a first
        batch without notifications that names the current offset)."""
        pb = self.pb
        shard, target = self.shard()
        method = self._stream_method(target, "GetNotifications", pb.NotificationsRequest,
                                     pb.NotificationBatch)
        request = pb.NotificationsRequest(shard=shard)
        if start_offset_exclusive is not None:
            request.start_offset_exclusive = start_offset_exclusive
        return self._guard("GetNotifications", lambda: method(
            request, metadata=self._metadata(shard)))

    def _guard(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except self._grpc.RpcError as exc:
            raise self.failure(what, exc) from None

    def failure(self, what: str, exc: Any) -> CoordinationError:
        """The coordination error a failed gRPC call means (module docstring)."""
        grpc = self._grpc
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = (exc.details() if callable(getattr(exc, "details", None)) else None) \
            or str(exc)
        raw = _raw_code(exc)
        where = f"Oxia at {self.address.target}"
        if raw == CODE_SESSION_NOT_FOUND or "session not found" in details:
            return UnknownSession(f"{where}: {what}: {details}")
        if raw in _NOT_NOW_CODES or any(text in details for text in _NOT_NOW_TEXTS):
            self.forget_shard()
            return CoordinatorUnavailable(f"{where} cannot serve {what} now: {details}",
                                          hint=_UNAVAILABLE_HINT)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return CoordinatorUnavailable(
                f"{where} did not answer {what} within {self.timeout_s:g} s",
                hint=_UNAVAILABLE_HINT)
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED):
            self.forget_shard()
            return CoordinatorUnavailable(
                f"{where} is unreachable ({what}): {details}",
                hint=tls_failure(details, self._security) or _UNAVAILABLE_HINT)
        if raw == CODE_NAMESPACE_NOT_FOUND or "namespace not found" in details:
            return CoordinationError(f"{where}: no namespace {self.address.namespace!r}",
                                     hint="name one the Oxia cluster has")
        name = code.name if code is not None else "?"
        return CoordinationError(f"{where} refused {what}: {name}: {details}")

    # ending -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()


def _raw_code(exc: Any) -> int | None:
    """The numeric status of a failed call, Oxia's own codes included (gRPC for Python
    reports a code it does not know as UNKNOWN, but the trailers keep the number)."""
    trailing = getattr(exc, "trailing_metadata", None)
    if not callable(trailing):
        return None
    try:
        for key, value in trailing() or ():
            if key == "grpc-status" and str(value).isdigit():
                return int(value)
    except Exception:  # a call that never reached a server has no trailers
        return None
    return None


def batches(call: Any, on_error: Callable[[Any], CoordinationError]) -> Iterator[Any]:
    """The answers of a streaming call, its gRPC error turned into a coordination one."""
    import grpc

    try:
        yield from call
    except grpc.RpcError as exc:
        raise on_error(exc) from None


def version_fields(pb_version: pb.Version) -> dict[str, Any]:
    """The ``nereus.coordination.Version`` fields of an Oxia version."""
    has = pb_version.HasField
    return {"version_id": int(pb_version.version_id),
            "modifications_count": int(pb_version.modifications_count),
            "created_timestamp_ms": int(pb_version.created_timestamp),
            "modified_timestamp_ms": int(pb_version.modified_timestamp),
            "session_id": int(pb_version.session_id) if has("session_id") else None,
            "client_identity": str(pb_version.client_identity)
            if has("client_identity") else None}
