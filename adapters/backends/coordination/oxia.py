"""The Oxia coordinator: the ``Coordinator`` Protocol on an Oxia server, the seeds'
authority for configuration, placement, leases and the checkpoint catalog.

The Protocol is Oxia's client API, so this is mostly a translation
(``docs/coordination.md``): a cluster's records live under ``nereus/<cluster>/`` on one
Oxia shard with order-preserving keys (``oxia_keys``), so ``version_id`` (the write's WAL
offset) is one counter for the cluster, the fencing token; ``put`` and ``delete`` are one
``Write`` each with Oxia's ``expected_version_id``; reads are ``Read``, ``List`` and
``RangeScan``; a session is an Oxia session (``oxia_session``); notifications the shard's
stream filtered to the prefix (``oxia_notifications``). Every call is bounded by
``request_timeout_s`` and fails as a Nereus error, never a gRPC exception (``oxia_wire``).
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from typing import Any, Final

from nereus.adapters.backends.coordination.coordinator_clock import SYSTEM_CLOCK, CoordinatorClock
from nereus.adapters.backends.coordination.oxia_keys import OxiaAddress, parse_oxia_url
from nereus.adapters.backends.coordination.oxia_notifications import (
    DEFAULT_RETENTION_MS,
    OxiaNotifications,
)
from nereus.adapters.backends.coordination.oxia_session import MAX_TTL_MS, MIN_TTL_MS, OxiaSession
from nereus.adapters.backends.coordination.oxia_wire import OxiaWire, UnknownSession, version_fields
from nereus.coordination.errors import (
    CoordinationError,
    KeyNotFound,
    SessionExpired,
    UnexpectedVersionId,
)
from nereus.coordination.protocol import Session, close_handles
from nereus.coordination.records import EXPECTED_RECORD_DOES_NOT_EXIST, Record, Version

__all__ = ["OxiaAddress", "OxiaCoordinator", "parse_oxia_url"]

_OK: Final = 0
_KEY_NOT_FOUND: Final = 1
_UNEXPECTED_VERSION_ID: Final = 2
_SESSION_DOES_NOT_EXIST: Final = 3


class OxiaCoordinator:
    """``nereus.coordination.Coordinator`` on Oxia, for one cluster."""

    def __init__(self, address: OxiaAddress, *, clock: CoordinatorClock = SYSTEM_CLOCK,
                 request_timeout_s: float = 5.0, heartbeats_per_ttl: int = 3,
                 watch_retry_max_s: float = 1.0,
                 notifications_retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        self._address = address
        self._clock = clock
        self._wire = OxiaWire(address, timeout_s=request_timeout_s)
        self._heartbeats_per_ttl = heartbeats_per_ttl
        self._watch_retry_max_s = watch_retry_max_s
        self._retention_ms = notifications_retention_ms
        self._lock = threading.Lock()  # guards the lists of what this object made
        self._sessions: list[OxiaSession] = []
        self._subscriptions: list[OxiaNotifications] = []
        self._closed = False

    @classmethod
    def from_url(cls, url: str, *, clock: CoordinatorClock = SYSTEM_CLOCK) -> OxiaCoordinator:
        """The coordinator of ``oxia://HOST:PORT/[NAMESPACE/]CLUSTER``."""
        return cls(parse_oxia_url(url), clock=clock)

    @property
    def address(self) -> OxiaAddress:
        return self._address

    # sessions ---------------------------------------------------------------------------
    def create_session(self, ttl_ms: int, *, client_identity: str) -> OxiaSession:
        """An Oxia session of ``ttl_ms`` (Oxia takes 2 s to 5 min)."""
        if not MIN_TTL_MS <= ttl_ms <= MAX_TTL_MS:
            raise ValueError(f"an Oxia session's TTL is {MIN_TTL_MS} to {MAX_TTL_MS} ms, "
                             f"not {ttl_ms}")
        pb = self._wire.pb
        sent_ms = self._clock.monotonic_ms()
        created = self._wire.unary(
            "CreateSession", pb.CreateSessionRequest, pb.CreateSessionResponse,
            lambda shard: pb.CreateSessionRequest(shard=shard, session_timeout_ms=ttl_ms,
                                                  client_identity=client_identity))
        session = OxiaSession(
            self._wire, self._clock, session_id=int(created.session_id), ttl_ms=ttl_ms,
            client_identity=client_identity, certain_until_ms=sent_ms + ttl_ms,
            heartbeat_interval_ms=max(ttl_ms // self._heartbeats_per_ttl, 1))
        with self._lock:
            self._sessions = [s for s in self._sessions if not s.lost()] + [session]
        return session

    # records ----------------------------------------------------------------------------
    def put(self, key: str, value: bytes, *, expected_version_id: int | None = None,
            ephemeral: Session | None = None) -> Version:
        pb = self._wire.pb
        request = pb.PutRequest(key=self._address.oxia_key(key), value=value,
                                partition_key=self._address.partition_key)
        if expected_version_id is not None:
            request.expected_version_id = expected_version_id
        if ephemeral is not None:
            if ephemeral.lost():
                raise SessionExpired(ephemeral.session_id, "lost before this put")
            request.session_id = ephemeral.session_id
            request.client_identity = ephemeral.client_identity
        answer = self._write(lambda shard: pb.WriteRequest(shard=shard, puts=[request])).puts[0]
        if answer.status == _UNEXPECTED_VERSION_ID:
            raise self._unexpected(key, expected_version_id)
        if answer.status == _SESSION_DOES_NOT_EXIST:
            session_id = ephemeral.session_id if ephemeral is not None else 0
            raise SessionExpired(session_id, "Oxia has no such session any more")
        self._check(answer.status, "put", key)
        version = Version(**version_fields(answer.version))
        if ephemeral is not None \
                and self._clock.monotonic_ms() >= ephemeral.certain_until_ms():
            self._orphan(key, version, ephemeral)
        return version

    def get(self, key: str) -> Record:
        pb = self._wire.pb
        answers = self._wire.streamed(
            "Read", pb.ReadRequest, pb.ReadResponse,
            lambda shard: pb.ReadRequest(shard=shard, gets=[pb.GetRequest(
                key=self._address.oxia_key(key), include_value=True)]))
        found = [get for answer in answers for get in answer.gets]
        if not found or found[0].status == _KEY_NOT_FOUND:
            raise KeyNotFound(key)
        self._check(found[0].status, "get", key)
        return Record(key=key, value=bytes(found[0].value),
                      version=Version(**version_fields(found[0].version)))

    def delete(self, key: str, *, expected_version_id: int | None = None) -> bool:
        pb = self._wire.pb
        request = pb.DeleteRequest(key=self._address.oxia_key(key))
        if expected_version_id is not None:
            request.expected_version_id = expected_version_id
        answer = self._write(
            lambda shard: pb.WriteRequest(shard=shard, deletes=[request])).deletes[0]
        if answer.status == _KEY_NOT_FOUND:
            if expected_version_id is None \
                    or expected_version_id == EXPECTED_RECORD_DOES_NOT_EXIST:
                return False
            raise UnexpectedVersionId(key, expected_version_id, None)
        if answer.status == _UNEXPECTED_VERSION_ID:
            raise self._unexpected(key, expected_version_id)
        self._check(answer.status, "delete", key)
        return True

    def delete_range(self, min_key_inclusive: str, max_key_exclusive: str) -> None:
        if min_key_inclusive >= max_key_exclusive:
            return
        pb = self._wire.pb
        request = pb.DeleteRangeRequest(
            start_inclusive=self._address.oxia_key(min_key_inclusive),
            end_exclusive=self._address.oxia_key(max_key_exclusive))
        answer = self._write(
            lambda shard: pb.WriteRequest(shard=shard, delete_ranges=[request])).delete_ranges[0]
        self._check(answer.status, "delete_range", min_key_inclusive)

    def list(self, min_key_inclusive: str, max_key_exclusive: str) -> builtins.list[str]:
        if min_key_inclusive >= max_key_exclusive:
            return []
        pb = self._wire.pb
        answers = self._wire.streamed(
            "List", pb.ListRequest, pb.ListResponse,
            lambda shard: pb.ListRequest(
                shard=shard, start_inclusive=self._address.oxia_key(min_key_inclusive),
                end_exclusive=self._address.oxia_key(max_key_exclusive)))
        keys = (self._address.key_of(raw) for answer in answers for raw in answer.keys)
        return [key for key in keys if key is not None]  # Oxia's order is ours (oxia_keys)

    def range_scan(self, min_key_inclusive: str,
                   max_key_exclusive: str) -> builtins.list[Record]:
        if min_key_inclusive >= max_key_exclusive:
            return []
        pb = self._wire.pb
        answers = self._wire.streamed(
            "RangeScan", pb.RangeScanRequest, pb.RangeScanResponse,
            lambda shard: pb.RangeScanRequest(
                shard=shard, start_inclusive=self._address.oxia_key(min_key_inclusive),
                end_exclusive=self._address.oxia_key(max_key_exclusive)))
        records: builtins.list[Record] = []
        for answer in answers:
            for found in answer.records:
                key = self._address.key_of(found.key)
                if key is not None and found.status == _OK:
                    records.append(Record(key=key, value=bytes(found.value),
                                          version=Version(**version_fields(found.version))))
        return records

    def _orphan(self, key: str, version: Version, session: Session) -> None:
        """An ephemeral put acknowledged when its session was no longer certain: Oxia may
        have been ending the session meanwhile, and v0.14 can then keep the record after
        the session is gone (it lists the session's records before deleting them, not
        atomically: oxia-db/oxia#742). Delete it (CAS on the version written) and say the
        session is over. A put acknowledged before that instant reached a live session,
        whose end will find it."""
        with contextlib.suppress(CoordinationError):
            self.delete(key, expected_version_id=version.version_id)
        raise SessionExpired(session.session_id, "the put was acknowledged only after the "
                             "session's TTL had run out (the record was deleted again)")

    def _write(self, build: Any) -> Any:
        pb = self._wire.pb
        try:
            return self._wire.unary("Write", pb.WriteRequest, pb.WriteResponse, build)
        except UnknownSession as exc:  # not expected from a write: its status says so
            raise CoordinationError(str(exc)) from None

    def _unexpected(self, key: str, expected: int | None) -> UnexpectedVersionId:
        """The refusal of a conditional write, naming the version found now."""
        try:
            actual: int | None = self.get(key).version.version_id
        except KeyNotFound:
            actual = None
        return UnexpectedVersionId(
            key, EXPECTED_RECORD_DOES_NOT_EXIST if expected is None else expected, actual)

    def _check(self, status: int, what: str, key: str) -> None:
        if status != _OK:
            raise CoordinationError(f"Oxia at {self._address.target} refused {what} of "
                                    f"{key!r}: status {status}")

    # notifications ----------------------------------------------------------------------
    def get_notifications(self, prefix: str) -> OxiaNotifications:
        """Subscribe to the changes under ``prefix`` made from now on."""
        subscription = OxiaNotifications(
            self._wire, self._address, prefix, clock=self._clock,
            retry_max_s=self._watch_retry_max_s, retention_ms=self._retention_ms)
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if not s.closed]
            self._subscriptions.append(subscription)
        return subscription

    # ending -----------------------------------------------------------------------------
    def close(self) -> None:
        """Close this object's subscriptions and sessions (their records go now) and its
        channels. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions, self._sessions = self._sessions, []
            subscriptions, self._subscriptions = self._subscriptions, []
        failed = close_handles(subscriptions, sessions)
        self._wire.close()
        if failed is not None:
            raise failed

    def __enter__(self) -> OxiaCoordinator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
