"""The etcd coordinator: the ``Coordinator`` Protocol on an etcd v3 server.

One etcd serves several clusters, each under ``/nereus/<cluster>/`` (``etcd://HOST:PORT/
CLUSTER``): records under ``keys/``, one key per session under ``sessions/``. The fencing
token ``version_id`` is the record's ``mod_revision`` (one counter for the whole store);
a put or delete is one transaction comparing the expected version (or absence); a session
is a lease (``etcd_session``); notifications a prefix watch registered at the revision
read when ``get_notifications`` is called, so no later change is missed (``etcd_watch``).
etcd keeps no times: both timestamps are 0. Every unary call is one HTTP request through
etcd3gw, bounded by ``request_timeout_s``, with the calling thread's own client (a
``requests.Session`` is not promised to be thread-safe). The mapping in full:
``docs/coordination.md``, "The etcd coordinator".
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from typing import Final

from nereus.adapters.backends.coordination.coordinator_clock import SYSTEM_CLOCK, CoordinatorClock
from nereus.adapters.backends.coordination.etcd_session import EtcdSession
from nereus.adapters.backends.coordination.etcd_watch import EtcdNotifications
from nereus.adapters.backends.coordination.etcd_wire import (
    Compare,
    DeleteRangeRequest,
    EtcdAddress,
    Gateway,
    KeyLayout,
    KeyValue,
    LeaseNotFound,
    PutRequest,
    RangeRequest,
    RequestOp,
    RevisionCompacted,
    TxnRequest,
    TxnResponse,
    parse_etcd_url,
)
from nereus.coordination.errors import (
    CoordinationError,
    KeyNotFound,
    SessionExpired,
    UnexpectedVersionId,
)
from nereus.coordination.protocol import Session, SessionTime, close_handles
from nereus.coordination.records import (
    EXPECTED_RECORD_DOES_NOT_EXIST,
    Record,
    Version,
    prefix_range,
)

__all__ = ["EtcdAddress", "EtcdCoordinator", "parse_etcd_url"]

MIN_TTL_MS: Final = 2_000  # etcd's smallest lease: 1.5 x its election timeout (1 s), rounded up
_IDENTITIES_KEPT: Final = 10_000


class EtcdCoordinator:
    """``nereus.coordination.Coordinator`` on etcd, under one cluster's root."""

    def __init__(self, address: EtcdAddress, *, clock: CoordinatorClock = SYSTEM_CLOCK,
                 request_timeout_s: float = 5.0, heartbeats_per_ttl: int = 3,
                 watch_retry_max_s: float = 1.0) -> None:
        self._address = address
        self._layout = KeyLayout.of(address.cluster)
        self._clock = clock
        self._request_timeout_s = request_timeout_s
        self._heartbeats_per_ttl = heartbeats_per_ttl
        self._watch_retry_max_s = watch_retry_max_s
        self._local = threading.local()  # each thread's Gateway
        self._lock = threading.Lock()  # guards the lists below and the identity cache
        self._gateways: list[Gateway] = []
        self._sessions: list[EtcdSession] = []
        self._subscriptions: list[EtcdNotifications] = []
        self._identities: dict[int, str] = {}  # lease id -> its session's client identity
        self._closed = False

    @classmethod
    def from_url(cls, url: str, *, clock: CoordinatorClock = SYSTEM_CLOCK) -> EtcdCoordinator:
        """The coordinator of ``etcd://HOST:PORT/CLUSTER``."""
        return cls(parse_etcd_url(url), clock=clock)

    @property
    def address(self) -> EtcdAddress:
        return self._address

    @property
    def layout(self) -> KeyLayout:
        return self._layout

    def _gateway(self) -> Gateway:
        if self._closed:
            raise CoordinationError(f"the coordinator of {self._address.url} is closed")
        gateway: Gateway | None = getattr(self._local, "gateway", None)
        if gateway is None:
            gateway = Gateway(self._address, timeout_s=self._request_timeout_s)
            self._local.gateway = gateway
            with self._lock:
                self._gateways.append(gateway)
        return gateway

    # sessions ---------------------------------------------------------------------------
    def create_session(self, ttl_ms: int, *, client_identity: str) -> EtcdSession:
        """A lease of ``ttl_ms`` rounded up to whole seconds (at least 2 s, etcd's
        smallest); the session's ``ttl_ms`` is what etcd granted."""
        if ttl_ms < MIN_TTL_MS:
            raise ValueError(f"an etcd session's TTL is at least {MIN_TTL_MS} ms, not {ttl_ms}")
        gateway = self._gateway()
        sent_ms = self._clock.monotonic_ms()
        grant = gateway.grant(-(-ttl_ms // 1000))
        if grant.lease_id == 0 or grant.ttl_s <= 0:
            raise CoordinationError(f"etcd at {self._address.endpoint} granted no lease: "
                                    f"{grant.error or grant}")
        self._write_identity(gateway, grant.lease_id, client_identity)
        granted_ms = grant.ttl_s * 1000
        interval_ms = max(granted_ms // self._heartbeats_per_ttl, 1)
        # the session's own client: a keep-alive never blocks longer than one beat
        own = Gateway(self._address, timeout_s=min(self._request_timeout_s, interval_ms / 1000))
        session = EtcdSession(
            own, self._clock, lease_id=grant.lease_id, ttl_ms=granted_ms,
            client_identity=client_identity, certain_until_ms=sent_ms + granted_ms,
            heartbeat_interval_ms=interval_ms)
        with self._lock:
            self._sessions = [s for s in self._sessions if not s.lost()] + [session]
            self._remember(grant.lease_id, client_identity)
        return session

    def session_time(self, session_id: int) -> SessionTime | None:
        """``SessionClock``: the lease's time to live (etcd counts in whole seconds)."""
        left_s, granted_s = self._gateway().time_to_live(session_id)
        if left_s < 0 or granted_s <= 0:
            return None
        return SessionTime(left_ms=left_s * 1000, ttl_ms=granted_s * 1000,
                           heartbeats_per_ttl=self._heartbeats_per_ttl)

    def _write_identity(self, gateway: Gateway, lease_id: int, identity: str) -> None:
        """Put the session's key (on its lease); revoke the lease if that fails."""
        try:
            gateway.txn(TxnRequest(compare=[], success=[RequestOp(request_put=PutRequest(
                key=self._layout.session(lease_id), value=identity.encode(),
                lease=lease_id))], failure=[]))
        except BaseException:
            with contextlib.suppress(CoordinationError):  # else it expires within its TTL
                gateway.revoke(lease_id)
            raise

    # records ----------------------------------------------------------------------------
    def put(self, key: str, value: bytes, *, expected_version_id: int | None = None,
            ephemeral: Session | None = None) -> Version:
        lease_id, identity = 0, None
        if ephemeral is not None:
            if ephemeral.lost():
                raise SessionExpired(ephemeral.session_id, "lost before this put")
            lease_id, identity = ephemeral.session_id, ephemeral.client_identity
        raw = self._layout.record(key)
        put = PutRequest(key=raw, value=value, lease=lease_id, prev_kv=True)
        try:
            answer = self._gateway().txn(TxnRequest(
                compare=_expecting(raw, expected_version_id),
                success=[RequestOp(request_put=put)],
                failure=[RequestOp(request_range=RangeRequest(key=raw))]))
        except LeaseNotFound as exc:
            raise SessionExpired(lease_id, "etcd has no such lease any more") from exc
        if not answer.succeeded:
            raise _unexpected(key, expected_version_id, answer)
        previous = answer.responses[0].response_put
        before = previous.prev_kv if previous is not None else None
        return Version(
            version_id=answer.header.revision,
            modifications_count=0 if before is None else before.version,
            created_timestamp_ms=0, modified_timestamp_ms=0,
            session_id=lease_id or None, client_identity=identity)

    def get(self, key: str) -> Record:
        found = self._read(self._layout.record(key), b"")
        if not found:
            raise KeyNotFound(key)
        return found[0]

    def delete(self, key: str, *, expected_version_id: int | None = None) -> bool:
        raw = self._layout.record(key)
        if expected_version_id is None:
            return self._gateway().delete_range(DeleteRangeRequest(key=raw)).deleted > 0
        if expected_version_id == EXPECTED_RECORD_DOES_NOT_EXIST:
            success = []  # absent, as expected: nothing to delete
        else:
            success = [RequestOp(request_delete_range=DeleteRangeRequest(key=raw))]
        answer = self._gateway().txn(TxnRequest(
            compare=_expecting(raw, expected_version_id), success=success,
            failure=[RequestOp(request_range=RangeRequest(key=raw))]))
        if not answer.succeeded:
            raise _unexpected(key, expected_version_id, answer)
        deleted = answer.responses[0].response_delete_range if answer.responses else None
        return deleted is not None and deleted.deleted > 0

    def delete_range(self, min_key_inclusive: str, max_key_exclusive: str) -> None:
        if min_key_inclusive >= max_key_exclusive:
            return
        self._gateway().delete_range(DeleteRangeRequest(
            key=self._layout.record(min_key_inclusive),
            range_end=self._layout.record(max_key_exclusive)))

    def list(self, min_key_inclusive: str, max_key_exclusive: str) -> builtins.list[str]:
        if min_key_inclusive >= max_key_exclusive:
            return []
        answer = self._gateway().range(RangeRequest(
            key=self._layout.record(min_key_inclusive),
            range_end=self._layout.record(max_key_exclusive), keys_only=True))
        return [self._layout.key_of(kv.key) for kv in answer.kvs]

    def range_scan(self, min_key_inclusive: str,
                   max_key_exclusive: str) -> builtins.list[Record]:
        if min_key_inclusive >= max_key_exclusive:
            return []
        return self._read(self._layout.record(min_key_inclusive),
                          self._layout.record(max_key_exclusive))

    def _read(self, key: bytes, range_end: bytes) -> builtins.list[Record]:
        """The records of one range read (``range_end`` empty: the one key)."""
        answer = self._gateway().range(RangeRequest(key=key, range_end=range_end))
        leases = {kv.lease for kv in answer.kvs if kv.lease}
        identities = self._identities_of(leases, answer.header.revision)
        return [Record(key=self._layout.key_of(kv.key), value=kv.value,
                       version=_version(kv, identities.get(kv.lease))) for kv in answer.kvs]

    def _identities_of(self, leases: set[int], revision: int) -> dict[int, str]:
        """The client identities of these sessions, read (if not known yet) at the
        revision the records were read at; a session whose key is gone has none."""
        with self._lock:
            known = {lease: self._identities[lease] for lease in leases
                     if lease in self._identities}
        if len(known) == len(leases):
            return known
        low, high = prefix_range(self._layout.sessions)
        request = RangeRequest(key=low.encode(), range_end=high.encode(), revision=revision)
        try:
            answer = self._gateway().range(request)
        except RevisionCompacted:
            answer = self._gateway().range(RangeRequest(key=request.key,
                                                        range_end=request.range_end))
        with self._lock:
            for kv in answer.kvs:
                if kv.lease:
                    self._remember(kv.lease, kv.value.decode())
            return {lease: self._identities[lease] for lease in leases
                    if lease in self._identities}

    def _remember(self, lease_id: int, identity: str) -> None:
        """Cache a session's identity (under ``_lock``)."""
        if len(self._identities) >= _IDENTITIES_KEPT:
            self._identities.clear()
        self._identities[lease_id] = identity

    # notifications ----------------------------------------------------------------------
    def get_notifications(self, prefix: str, *,
                          after_version_id: int | None = None) -> EtcdNotifications:
        """Subscribe to the changes under ``prefix`` made from now on; with
        ``after_version_id`` (etcd-only), to those made after that revision, which
        raises ``NotificationsLost`` if etcd has compacted them."""
        if after_version_id is None:
            low, _ = prefix_range(self._layout.records)
            after_version_id = self._gateway().range(RangeRequest(
                key=low.encode(), keys_only=True)).header.revision
        subscription = EtcdNotifications(
            self._address, self._layout, prefix, start_revision=after_version_id + 1,
            connect_timeout_s=self._request_timeout_s, retry_max_s=self._watch_retry_max_s)
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if not s.closed]
            self._subscriptions.append(subscription)
        return subscription

    # ending -----------------------------------------------------------------------------
    def close(self) -> None:
        """Close this object's subscriptions and sessions (revoking their leases, so their
        records go now) and its clients. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions, self._sessions = self._sessions, []
            subscriptions, self._subscriptions = self._subscriptions, []
            gateways, self._gateways = self._gateways, []
        failed = close_handles(subscriptions, sessions)
        for gateway in gateways:
            gateway.close()
        if failed is not None:
            raise failed

    def __enter__(self) -> EtcdCoordinator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _expecting(raw: bytes, expected: int | None) -> builtins.list[Compare]:
    """The compares of "the record is at ``expected``" (None: no condition)."""
    if expected is None:
        return []
    if expected == EXPECTED_RECORD_DOES_NOT_EXIST:
        return [Compare(key=raw, target="CREATE", create_revision=0)]
    return [Compare(key=raw, target="MOD", mod_revision=expected),
            Compare(key=raw, target="VERSION", result="GREATER", version=0)]


def _unexpected(key: str, expected: int | None, answer: TxnResponse) -> UnexpectedVersionId:
    """The refusal of a failed transaction, naming the version its failure branch read."""
    found = answer.responses[0].response_range if answer.responses else None
    actual = found.kvs[0].mod_revision if found is not None and found.kvs else None
    return UnexpectedVersionId(key, EXPECTED_RECORD_DOES_NOT_EXIST if expected is None
                               else expected, actual)


def _version(kv: KeyValue, identity: str | None) -> Version:
    return Version(version_id=kv.mod_revision, modifications_count=kv.version - 1,
                   created_timestamp_ms=0, modified_timestamp_ms=0,
                   session_id=kv.lease or None, client_identity=identity if kv.lease else None)
