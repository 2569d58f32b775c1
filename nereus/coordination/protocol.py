"""The ``Coordinator`` Protocol: Oxia's operations, one for one, for every backend.

A backend is a key-value store with **versioned records and compare-and-set** (``put``
and ``delete`` take ``expected_version_id``: ``EXPECTED_RECORD_DOES_NOT_EXIST`` or an exact
version, else ``UnexpectedVersionId``); **sessions** (``create_session(ttl_ms)``, kept alive
by the session; an ``ephemeral=session`` record goes when its session is closed, or once the
store has not heard from it for ``ttl_ms``, never before; then every use raises
``SessionExpired``); **notifications** on a prefix, in the store's order, from the first
change after ``get_notifications`` returned; and **a fencing token**: ``version_id``
strictly increases across all writes of a store. Backends: Oxia, etcd and the embedded
SQLite coordinator (``docs/coordination.md``). Not in it: partition keys, sequential keys,
secondary indexes, floor/ceiling lookups.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from nereus.coordination.errors import CoordinationError
from nereus.coordination.records import Notification, Record, Version


class Session(Protocol):
    """A liveness lease with a time-to-live, kept alive by its own heartbeats (at least
    three per TTL) until closed or lost. Times are on the coordinator's monotonic clock,
    in milliseconds."""

    @property
    def session_id(self) -> int:
        """The store's id of the session (``Version.session_id`` of its records)."""
        ...

    @property
    def ttl_ms(self) -> int:
        """How long the store keeps the session without hearing from it."""
        ...

    @property
    def client_identity(self) -> str:
        """Who holds the session (``Version.client_identity`` of its records)."""
        ...

    def keep_alive(self) -> None:
        """Heartbeat now (the session also does so by itself, several times per TTL).
        Raises ``SessionExpired`` if the session is over."""
        ...

    def certain_until_ms(self) -> int:
        """The monotonic instant before which the session is certainly alive in the
        store: the start of the latest acknowledged heartbeat plus the TTL. Lease
        safety compares it with now plus a margin before acting under the session."""
        ...

    def lost(self) -> bool:
        """Whether the session is known to be over (closed, expired, or not heard back
        within its TTL): nothing may be done under it any more."""
        ...

    def wait_lost(self, timeout_s: float) -> bool:
        """Block until the session is lost or ``timeout_s`` has passed; returns ``lost()``."""
        ...

    def close(self) -> None:
        """End the session: its ephemeral records are deleted now. Idempotent."""
        ...


class Notifications(Protocol):
    """A subscription to the changes of keys under one prefix. Iterating blocks for the
    next change and stops once the subscription is closed."""

    def __iter__(self) -> Iterator[Notification]: ...

    def __next__(self) -> Notification:
        """The next change (blocking). Raises ``NotificationsLost`` if the store dropped
        changes before they were read; ``StopIteration`` once closed."""
        ...

    def poll(self, timeout_s: float) -> Notification | None:
        """The next change, or None if none came within ``timeout_s``. Raises
        ``NotificationsLost`` as ``__next__`` does."""
        ...

    def close(self) -> None:
        """Stop the subscription (a blocked ``__next__`` stops too). Idempotent."""
        ...


class Coordinator(Protocol):
    """One coordination store, shaped like Oxia's client (``oxia.Client``)."""

    def create_session(self, ttl_ms: int, *, client_identity: str) -> Session:
        """A new session, alive for ``ttl_ms`` after each heartbeat."""
        ...

    def put(self, key: str, value: bytes, *, expected_version_id: int | None = None,
            ephemeral: Session | None = None) -> Version:
        """Write ``value`` at ``key``; its new version. With ``expected_version_id``, only
        if the record is at that version (``EXPECTED_RECORD_DOES_NOT_EXIST``: absent),
        else ``UnexpectedVersionId``. With ``ephemeral``, the record belongs to that
        session (``SessionExpired`` if it is over); without, a put makes it durable."""
        ...

    def get(self, key: str) -> Record:
        """The record at ``key``; ``KeyNotFound`` if there is none."""
        ...

    def delete(self, key: str, *, expected_version_id: int | None = None) -> bool:
        """Delete the record at ``key``: True if it existed, False if there was none.
        With ``expected_version_id``, only if the record is at that version, else
        ``UnexpectedVersionId`` (an absent record passes only with
        ``EXPECTED_RECORD_DOES_NOT_EXIST``, and returns False)."""
        ...

    def delete_range(self, min_key_inclusive: str, max_key_exclusive: str) -> None:
        """Delete every record with a key in ``[min_key_inclusive, max_key_exclusive)``."""
        ...

    def list(self, min_key_inclusive: str, max_key_exclusive: str) -> builtins.list[str]:
        """The keys in ``[min_key_inclusive, max_key_exclusive)``, in key order."""
        ...

    def range_scan(self, min_key_inclusive: str,
                   max_key_exclusive: str) -> builtins.list[Record]:
        """The records with keys in ``[min_key_inclusive, max_key_exclusive)``, in key
        order, read at one instant."""
        ...

    def get_notifications(self, prefix: str) -> Notifications:
        """Subscribe to the changes of keys starting with ``prefix`` made from now on."""
        ...

    def close(self) -> None:
        """Close the sessions and subscriptions made here and let go of the store."""
        ...


@dataclass(frozen=True, slots=True)
class SessionTime:
    """How long a session lives without another heartbeat (``left_ms``, 0 or less: it is
    over), and the TTL each heartbeat gives it, as its store says now."""

    left_ms: int
    ttl_ms: int
    heartbeats_per_ttl: int  # how often a live holder heartbeats in one TTL


@runtime_checkable
class SessionClock(Protocol):
    """What some coordinators also tell (the embedded one, etcd): how long a session has
    left, so a reader can see a holder that stopped heartbeating before its records go."""

    def session_time(self, session_id: int) -> SessionTime | None:
        """The session's time left; None when the store does not know it (ended)."""
        ...


def close_handles(subscriptions: Iterable[Notifications], sessions: Iterable[Session]
                  ) -> CoordinationError | None:
    """Close every subscription, then every session (each session's records go now); the
    first session that failed to close, after closing all the others, or None. What a
    coordinator's ``close`` does before closing its own connections."""
    for subscription in subscriptions:
        subscription.close()
    failed: CoordinationError | None = None
    for session in sessions:
        try:
            session.close()
        except CoordinationError as exc:
            failed = failed or exc
    return failed
