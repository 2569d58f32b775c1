"""What a subscription to a coordinator's change stream does whatever the coordinator: a
thread it owns reads one stream after another (``_stream``, the coordinator's own), pausing
between them with a backoff that doubles up to ``retry_max_s`` and starts again after a
stream that opened; readers take the queued notifications in order; once a stream says that
changes are gone (``StreamLost``), readers get what was queued, then ``NotificationsLost``
on every read; closing cuts the stream being read (``_cut``) and joins the thread.

etcd's watch (``etcd_watch.py``) and Oxia's notification stream (``oxia_notifications.py``)
are the two streams; each keeps where it would resume.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Final, Generic, TypeVar

from nereus.coordination.errors import NotificationsLost
from nereus.coordination.records import Notification

RETRY_MIN_S: Final = 0.05
_NEXT_SLICE_S: Final = 1.0  # how long one wait of a blocking __next__ lasts
Stream = TypeVar("Stream")  # what a coordinator's stream is read from (a socket, a call)


class StreamLost(Exception):
    """Raised by ``_stream``: the changes after ``after`` through ``through`` are gone."""

    def __init__(self, after: int, through: int) -> None:
        super().__init__(after, through)
        self.after = after
        self.through = through


class StreamSubscription(ABC, Generic[Stream]):
    """A subscription (``nereus.coordination.Notifications``) to one key prefix; a
    coordinator's subclass gives ``_stream`` and ``_cut`` and calls ``_start`` last."""

    def __init__(self, prefix: str, *, retry_max_s: float, thread_name: str) -> None:
        self._prefix = prefix
        self._retry_max_s = retry_max_s
        self._changed = threading.Condition()  # guards the fields below, and the subclass's
        self._ready: deque[Notification] = deque()
        self._lost: tuple[int, int] | None = None  # (after, gone through) once lost
        self._open: Stream | None = None  # the stream being read (what ``_cut`` ends)
        self._closed = threading.Event()
        self.last_error: str | None = None  # why the latest stream ended, if it did
        self.streams_opened = 0  # how many streams were opened (1 + reconnections)
        self._thread = threading.Thread(target=self._run, daemon=True, name=thread_name)

    def _start(self) -> None:
        self._thread.start()

    # reading ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Notification]:
        return self

    def __next__(self) -> Notification:
        while True:
            found = self.poll(_NEXT_SLICE_S)
            if found is not None:
                return found
            if self._closed.is_set():
                raise StopIteration

    def poll(self, timeout_s: float) -> Notification | None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._closed.is_set():
                if self._ready:
                    return self._ready.popleft()
                if self._lost is not None:
                    raise NotificationsLost(self._prefix, *self._lost)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
        return None

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        with self._changed:
            self._closed.set()
            stream, self._open = self._open, None
            self._changed.notify_all()
        if stream is not None:
            self._cut(stream)
        if threading.current_thread() is not self._thread:
            self._thread.join()

    # the stream -------------------------------------------------------------------------
    def _run(self) -> None:
        backoff_s = RETRY_MIN_S
        while not self._closed.is_set():
            opened = self.streams_opened
            try:
                self._stream()
            except StreamLost as lost:
                with self._changed:
                    self._lost = (lost.after, lost.through)
                    self._changed.notify_all()
                return
            except Exception as exc:  # the stream ended: open it again after a pause
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self._gives_up(exc):
                    return
            if self.streams_opened > opened:
                backoff_s = RETRY_MIN_S
            self._closed.wait(backoff_s)
            backoff_s = min(backoff_s * 2, self._retry_max_s)

    def _opened(self, stream: Stream) -> bool:
        """Hold ``stream`` as the one being read; False (cut at once) once closed."""
        with self._changed:
            if not self._closed.is_set():
                self._open = stream
                return True
        self._cut(stream)
        return False

    def _ended(self, stream: Stream | None) -> None:
        """``stream`` is no longer read."""
        with self._changed:
            if self._open is stream:
                self._open = None

    def _deliver(self, found: Iterable[Notification]) -> None:
        """Queue ``found`` for the readers, in order (the caller holds ``_changed``)."""
        self._ready.extend(found)
        self._changed.notify_all()

    # the coordinator's --------------------------------------------------------------------
    @abstractmethod
    def _stream(self) -> None:
        """Read one stream until it ends (an exception says how; ``StreamLost``: for good)."""

    @abstractmethod
    def _cut(self, stream: Stream) -> None:
        """End ``stream`` from another thread (a blocked read returns at once)."""

    def _gives_up(self, error: Exception) -> bool:
        """Whether the thread stops after a stream that ended with ``error``."""
        return False
