"""Notifications of the etcd coordinator: a prefix watch read by a thread the subscription
owns, which reconnects and resumes where it stopped.

The thread reads etcd's ``/v3/watch`` stream itself (etcd3gw's iterator never ends when the
stream does, and runs on a pool it does not let us own) and keeps ``next_revision``, the
first revision not delivered: answers are queued whole, progress notifications move it on
a quiet prefix, and a stream that ends is reopened at ``next_revision`` after a backoff, so
nothing is skipped or delivered twice. When etcd cancels the watch because that revision
was compacted, the subscription delivers what it queued, then raises
``NotificationsLost`` on every read. Closing shuts the socket down (a blocked read ends at
once); a vanished peer is found by TCP keep-alives.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
from typing import Final

import msgspec

from nereus.adapters.backends.coordination.etcd_security import security_for
from nereus.adapters.backends.coordination.etcd_wire import (
    API_PATH,
    EtcdAddress,
    Gateway,
    GatewayError,
    Header,
    KeyLayout,
    KeyValue,
)
from nereus.adapters.backends.coordination.stream_subscription import (
    StreamLost,
    StreamSubscription,
)
from nereus.coordination.records import Notification, NotificationType, prefix_range

_KEEPALIVE: Final = (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))


class WatchCreate(msgspec.Struct, frozen=True):
    key: bytes
    range_end: bytes
    start_revision: int
    progress_notify: bool = True


class WatchRequest(msgspec.Struct, frozen=True):
    create_request: WatchCreate


class Event(msgspec.Struct, frozen=True):
    kv: KeyValue
    type: str = "PUT"  # left out for a PUT


class WatchResponse(msgspec.Struct, frozen=True):
    header: Header = Header()
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    cancel_reason: str = ""
    events: list[Event] = []


class WatchLine(msgspec.Struct, frozen=True):
    """One line of the stream: an answer, or the gateway's error ending it."""

    result: WatchResponse | None = None
    error: GatewayError | None = None


class _StreamEnded(Exception):
    """The stream ended without losing anything: open it again."""


class EtcdNotifications(StreamSubscription[socket.socket]):
    """A subscription (``nereus.coordination.Notifications``) to one key prefix."""

    def __init__(self, address: EtcdAddress, layout: KeyLayout, prefix: str, *,
                 start_revision: int, connect_timeout_s: float, retry_max_s: float) -> None:
        super().__init__(prefix, retry_max_s=retry_max_s, thread_name=f"etcd-watch-{prefix}")
        self._address = address
        self._layout = layout
        low, high = prefix_range(layout.records + prefix)
        self._span = (low.encode(), high.encode())
        self._connect_timeout_s = connect_timeout_s
        self._next_revision = start_revision  # guarded by _changed
        self._start()

    @property
    def next_revision(self) -> int:
        """The first revision not delivered yet (where a new stream would start)."""
        with self._changed:
            return self._next_revision

    # the stream -------------------------------------------------------------------------
    def _cut(self, stream: socket.socket) -> None:
        _shut(stream)

    def _stream(self) -> None:
        """Watch from ``next_revision`` until the stream ends (an exception says how)."""
        address = self._address
        security = security_for(address.host, address.port)
        headers = {"Content-Type": "application/json"}
        conn: http.client.HTTPConnection
        if security is not None and security.tls:
            conn = http.client.HTTPSConnection(address.host, address.port,
                                               timeout=self._connect_timeout_s,
                                               context=security.ssl_context(
                                                   f"etcd at {address.endpoint}"))
        else:
            conn = http.client.HTTPConnection(address.host, address.port,
                                              timeout=self._connect_timeout_s)
        if security is not None and security.username is not None:
            gateway = Gateway(address, timeout_s=self._connect_timeout_s)
            try:
                headers["Authorization"] = gateway.token()
            finally:
                gateway.close()
        try:
            conn.connect()
            if conn.sock is None or not self._opened(conn.sock):
                return
            with self._changed:
                start = self._next_revision
            request = WatchRequest(WatchCreate(key=self._span[0], range_end=self._span[1],
                                               start_revision=start))
            conn.request("POST", API_PATH + "watch", msgspec.json.encode(request), headers)
            answer = conn.getresponse()
            if answer.status != http.client.OK:
                raise _StreamEnded(f"HTTP {answer.status}: {answer.read(500)!r}")
            _keep_alive(conn.sock)  # no read timeout: a quiet watch is not a dead one
            while True:
                line = answer.readline()
                if not line:
                    raise _StreamEnded("etcd closed the stream")
                if line.strip():
                    self._take(msgspec.json.decode(line, type=WatchLine, strict=False))
        finally:
            self._ended(conn.sock)
            conn.close()

    def _take(self, line: WatchLine) -> None:
        if line.error is not None or line.result is None:
            why = line.error.message if line.error is not None else "an empty answer"
            raise _StreamEnded(f"etcd ended the watch: {why}")
        result = line.result
        if result.canceled:
            if result.compact_revision > 0:  # compacted: what came after ours is gone
                raise StreamLost(self._next_revision - 1, result.compact_revision - 1)
            raise _StreamEnded(f"etcd cancelled the watch: {result.cancel_reason or '?'}")
        if result.created:
            self.streams_opened += 1
            return
        with self._changed:
            if result.events:
                self._deliver(self._change(event) for event in result.events)
                self._next_revision = result.events[-1].kv.mod_revision + 1
            elif result.header.revision >= self._next_revision:  # a progress notification
                self._next_revision = result.header.revision + 1

    def _change(self, event: Event) -> Notification:
        key = self._layout.key_of(event.kv.key)
        if event.type == "DELETE":
            return Notification(type=NotificationType.KEY_DELETED, key=key, version_id=None)
        kind = NotificationType.KEY_CREATED if event.kv.version == 1 \
            else NotificationType.KEY_MODIFIED
        return Notification(type=kind, key=key, version_id=event.kv.mod_revision)


def _keep_alive(sock: socket.socket | None) -> None:
    """Block without a timeout, but let the kernel probe a silent peer (about 25 s)."""
    if sock is None:
        return
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in _KEEPALIVE:
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _shut(sock: socket.socket) -> None:
    """End a blocked read of ``sock`` from another thread."""
    with contextlib.suppress(OSError):  # already closed by the reader
        sock.shutdown(socket.SHUT_RDWR)
