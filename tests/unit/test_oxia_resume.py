"""The Oxia coordinator's own rules, on scripted servers: where a notification stream
resumes and when it must say ``NotificationsLost``, and why a late keep-alive
acknowledgement never extends a session (``oxia_notifications``, ``oxia_session``)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nereus.adapters.backends.coordination.oxia_keys import OxiaAddress
from nereus.adapters.backends.coordination.oxia_notifications import OxiaNotifications
from nereus.adapters.backends.coordination.oxia_session import OxiaSession
from nereus.adapters.backends.coordination.oxia_wire import messages
from nereus.coordination import NotificationsLost, NotificationType, SessionExpired
from tests.fake_clock import FakeClock
from tests.polling import wait_until

pb = messages()
ADDRESS = OxiaAddress("127.0.0.1", 1, "default", "c")
RETENTION_MS = 60_000


def batch(offset: int, *keys: str) -> Any:
    """A notification batch at ``offset`` creating ``keys`` of the cluster."""
    found = pb.NotificationBatch(shard=0, offset=offset)
    for key in keys:
        found.notifications[ADDRESS.oxia_key(key)].CopyFrom(
            pb.Notification(type=0, version_id=offset))
    return found


class _Break(Exception):
    """The scripted stream ends here (as a broken connection does)."""


class Call:
    """One scripted stream: its batches, then a break (or blocking until cancelled)."""

    def __init__(self, items: list[Any], *, then_block: bool) -> None:
        self._items = items
        self._then_block = then_block
        self._cancelled = threading.Event()

    def __iter__(self) -> Iterator[Any]:
        yield from self._items
        if self._then_block:
            self._cancelled.wait(30)
            return
        raise _Break("the connection broke")

    def cancel(self) -> None:
        self._cancelled.set()


class ScriptedWire:
    """Answers each ``subscribe(start)`` with the next scripted stream; records the starts."""

    timeout_s = 5.0

    def __init__(self, streams: list[Call]) -> None:
        self._streams = streams
        self.starts: queue.Queue[int | None] = queue.Queue()

    def subscribe(self, start_offset_exclusive: int | None) -> Call:
        self.starts.put(start_offset_exclusive)
        return self._streams.pop(0) if self._streams else Call([], then_block=True)

    def failure(self, what: str, exc: Any) -> Exception:
        raise AssertionError(f"no gRPC error is scripted: {what} {exc!r}")


def subscribed(wire: ScriptedWire, clock: FakeClock) -> OxiaNotifications:
    return OxiaNotifications(wire, ADDRESS, "n/", clock=clock,  # type: ignore[arg-type]
                             retry_max_s=0.01, retention_ms=RETENTION_MS)


def keys_of(notifications: OxiaNotifications, count: int) -> list[str]:
    out = []
    for _ in range(count):
        found = notifications.poll(10)
        assert found is not None and found.type is NotificationType.KEY_CREATED
        out.append(found.key)
    return out


def test_a_resumed_stream_starts_at_the_batch_last_read_and_skips_it() -> None:
    """After a break the new stream is asked to start at the offset of the batch last read
    (start exclusive = that offset - 1); that batch comes again and is dropped, the later
    ones are delivered once."""
    wire = ScriptedWire([Call([batch(5), batch(6, "n/a")], then_block=False),
                         Call([batch(6, "n/a"), batch(7, "n/b")], then_block=True)])
    notifications = subscribed(wire, FakeClock())
    assert keys_of(notifications, 2) == ["n/a", "n/b"]
    assert [wire.starts.get(timeout=5) for _ in range(2)] == [None, 5]
    assert notifications.poll(0.1) is None
    notifications.close()


def test_a_resumed_stream_that_skipped_the_batch_last_read_is_notifications_lost() -> None:
    """When the new stream's first batch is later than the one last read, Oxia trimmed it
    (and maybe the changes after it): what was queued is delivered, then every read raises
    NotificationsLost."""
    wire = ScriptedWire([Call([batch(5), batch(6, "n/a")], then_block=False),
                         Call([batch(9, "n/c")], then_block=True)])
    notifications = subscribed(wire, FakeClock())
    assert keys_of(notifications, 1) == ["n/a"]
    with pytest.raises(NotificationsLost):
        notifications.poll(10)
    with pytest.raises(NotificationsLost):
        next(notifications)
    notifications.close()


@pytest.mark.parametrize(("elapsed_s", "lost"), [(RETENTION_MS / 2000 - 1, False),
                                                 (RETENTION_MS / 2000, True)])
def test_before_any_batch_the_time_since_subscribing_decides(elapsed_s: float,
                                                              lost: bool) -> None:
    """Broken before any batch was read, the position is the starting commit offset, which
    need not be a batch: a resumption within half the retention delivers what follows;
    one later, whose first batch is not that offset, is NotificationsLost."""
    clock = FakeClock()
    resume = threading.Event()
    first = Call([batch(5)], then_block=False)
    wire = ScriptedWire([first, Call([batch(8, "n/a")], then_block=True)])
    original = wire.subscribe

    def gated(start: int | None) -> Call:
        if start is not None:  # the resumption waits for the test to move the clock
            resume.wait(10)
        return original(start)

    wire.subscribe = gated  # type: ignore[method-assign, assignment]
    notifications = subscribed(wire, clock)
    clock.advance(elapsed_s)
    resume.set()
    if lost:
        with pytest.raises(NotificationsLost):
            notifications.poll(10)
    else:
        assert keys_of(notifications, 1) == ["n/a"]
    notifications.close()


class AckWire:
    """Acknowledges keep-alives after ``delay_s`` of the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.pb = pb
        self.clock = clock
        self.delay_s = 0.0

    def unary(self, name: str, request: Any, answer: Any, build: Callable[[int], Any]) -> Any:
        build(0)
        self.clock.advance(self.delay_s)
        return answer()


def test_a_keep_alive_acknowledged_after_the_ttl_loses_the_session() -> None:
    """A prompt acknowledgement moves certain-until to the send time plus the TTL; one
    that arrives after certain-until proves nothing (Oxia may have ended the session and
    still answer OK while it deletes its records): the session is lost, not extended."""
    clock = FakeClock()
    wire = AckWire(clock)
    start = clock.monotonic_ms()
    session = OxiaSession(wire, clock, session_id=7, ttl_ms=3_000,  # type: ignore[arg-type]
                          client_identity="n1", certain_until_ms=start + 3_000,
                          heartbeat_interval_ms=60_000_000)
    wire.delay_s = 0.5
    session.keep_alive()
    assert session.certain_until_ms() == start + 3_000
    sent = clock.monotonic_ms()
    session.keep_alive()
    assert session.certain_until_ms() == sent + 3_000
    wire.delay_s = 4.0
    with pytest.raises(SessionExpired, match="only after the session's TTL had run out"):
        session.keep_alive()
    assert session.lost()
    wait_until("the session ends", lambda: session.wait_lost(0.01), 5)
    session.close()
