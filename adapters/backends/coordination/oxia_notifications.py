"""Notifications of the Oxia coordinator: the shard's notification stream, read by a thread
the subscription owns, which reconnects, resumes where it stopped, and notices when it
cannot.

The thread keeps ``position``, the WAL offset of the last batch consumed, and queues the
changes under the prefix. After a break it asks the new stream to start *at*
``position``: Oxia trims oldest first, so that batch is still held iff nothing after it
was trimmed; any other first batch means changes may be gone, and the subscription
delivers what it queued, then raises ``NotificationsLost`` on every read. Before the first
batch the check is by time: a resumption within half of Oxia's notification retention
(``retention_ms``) loses nothing. Closing cancels the stream; a silent server is found by
gRPC keep-alives (about 15 s).
"""

from __future__ import annotations

import threading
from typing import Any, Final, Protocol

from nereus.adapters.backends.coordination.coordinator_clock import CoordinatorClock
from nereus.adapters.backends.coordination.oxia_keys import OxiaAddress
from nereus.adapters.backends.coordination.oxia_wire import OxiaWire, batches
from nereus.adapters.backends.coordination.stream_subscription import (
    StreamLost,
    StreamSubscription,
)
from nereus.coordination.errors import CoordinationError, CoordinatorUnavailable
from nereus.coordination.records import Notification, NotificationType

DEFAULT_RETENTION_MS: Final = 3_600_000  # Oxia's --notifications-retention-time default
_TYPES: Final = {0: NotificationType.KEY_CREATED, 1: NotificationType.KEY_MODIFIED,
                 2: NotificationType.KEY_DELETED, 3: NotificationType.KEY_RANGE_DELETED}


class _Call(Protocol):
    """A gRPC streaming call, as far as a subscription ends it."""

    def cancel(self) -> bool: ...


class OxiaNotifications(StreamSubscription[_Call]):
    """A subscription (``nereus.coordination.Notifications``) to one key prefix."""

    def __init__(self, wire: OxiaWire, address: OxiaAddress, prefix: str, *,
                 clock: CoordinatorClock, retry_max_s: float,
                 retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        super().__init__(prefix, retry_max_s=retry_max_s,
                         thread_name=f"oxia-notifications-{prefix}")
        self._wire = wire
        self._address = address
        self._clock = clock
        self._retention_ms = retention_ms
        self._position: int | None = None  # the offset of the last batch consumed
        self._position_is_batch = False  # False while it is the starting commit offset
        self._started_ms = clock.monotonic_ms()
        self._start_error: CoordinationError | None = None
        self._positioned = threading.Event()
        self._start()
        if not self._positioned.wait(wire.timeout_s) or self._start_error is not None:
            error = self._start_error or CoordinatorUnavailable(
                f"Oxia at {address.target} did not start the notification stream within "
                f"{wire.timeout_s:g} s")
            self.close()
            raise error

    @property
    def position(self) -> int | None:
        """The offset of the last batch consumed (where a new stream resumes)."""
        with self._changed:
            return self._position

    # the stream -------------------------------------------------------------------------
    def _cut(self, stream: _Call) -> None:
        stream.cancel()

    def _gives_up(self, error: Exception) -> bool:
        """A stream that could not start before the first position: the constructor
        raises what the coordinator said."""
        if isinstance(error, CoordinationError) and not self._positioned.is_set():
            self._start_error = error
            self._positioned.set()
            return True
        return False

    def _stream(self) -> None:
        """Read one stream until it ends (an exception says how)."""
        with self._changed:
            position, is_batch = self._position, self._position_is_batch
        resume_from = None if position is None else max(position - 1, -1)
        call = self._wire.subscribe(resume_from)
        if not self._opened(call):
            return
        self.streams_opened += 1
        first = True
        try:
            for batch in batches(call, lambda exc: self._wire.failure("GetNotifications", exc)):
                offset = int(batch.offset)
                if position is None:  # a new subscription: the starting commit offset
                    self._take_position(offset, is_batch=False)
                    position = offset
                    self._positioned.set()
                    first = False
                    continue
                if first:
                    first = False
                    if offset != position and (is_batch or self._too_late_to_tell()):
                        raise StreamLost(position, offset - 1)
                if offset <= position:
                    continue  # the batch at the position again: delivered already
                self._take(batch)
                position = offset
            raise CoordinatorUnavailable("Oxia ended the notification stream")
        finally:
            self._ended(call)

    def _too_late_to_tell(self) -> bool:
        """Whether Oxia may have trimmed batches written since the subscription started."""
        return self._clock.monotonic_ms() - self._started_ms >= self._retention_ms // 2

    def _take_position(self, offset: int, *, is_batch: bool) -> None:
        with self._changed:
            self._position, self._position_is_batch = offset, is_batch

    def _take(self, batch: Any) -> None:
        found: list[Notification] = []
        for oxia_key in sorted(batch.notifications):
            change = self._change(oxia_key, batch.notifications[oxia_key])
            if change is not None and change.concerns(self._prefix):
                found.append(change)
        with self._changed:
            self._position, self._position_is_batch = int(batch.offset), True
            if found:
                self._deliver(found)

    def _change(self, oxia_key: str, note: Any) -> Notification | None:
        key = self._address.key_of(oxia_key)
        kind = _TYPES.get(int(note.type))
        if key is None or kind is None:
            return None
        if kind is NotificationType.KEY_RANGE_DELETED:
            end = self._address.key_of(note.key_range_last) \
                if note.HasField("key_range_last") else None
            return Notification(type=kind, key=key, version_id=None,
                                key_range_end=end if end is not None else chr(0x10FFFF))
        version = int(note.version_id) if note.HasField("version_id") else None
        return Notification(type=kind, key=key,
                            version_id=None if kind is NotificationType.KEY_DELETED
                            else version)
