"""A node says which evidence keys it holds once per change; a coordinator that refuses the
report is said once (node_keys_not_reported) however many rounds it lasts, and the report
is made the first round it answers again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from nereus.coordination import CoordinatorUnavailable
from nereus.engine.hosting.cluster.following import KeyFollower
from nereus.engine.runtime.event_log import RecordingEventLog


class FlakyCoordinator:
    """Refuses ``failures`` puts, then keeps what it is given."""

    def __init__(self, failures: int) -> None:
        self.failures, self.puts = failures, 0

    def put(self, key: str, value: bytes, **_: object) -> None:
        if self.failures:
            self.failures -= 1
            raise CoordinatorUnavailable("etcd at 127.0.0.1:2379 did not answer")
        self.puts += 1


def follower(coordinator: FlakyCoordinator, events: RecordingEventLog) -> KeyFollower:
    store = SimpleNamespace(handle=SimpleNamespace(coordinator=coordinator),
                            key=lambda relative: f"/c/{relative}")
    engine = SimpleNamespace(config=SimpleNamespace(routes={}))
    session = SimpleNamespace(session_id=7)
    return KeyFollower(cast(Any, store), cast(Any, engine), None, events, node_id="n1",
                       session=lambda: cast(Any, session))


def test_a_refused_report_is_said_once_and_made_when_the_coordinator_answers() -> None:
    """Five refused rounds give one node_keys_not_reported; the sixth round reports; later
    rounds with nothing changed write nothing."""
    events, coordinator = RecordingEventLog(), FlakyCoordinator(failures=5)
    keys = follower(coordinator, events)
    for _ in range(5):
        keys.follow()
    (said,) = events.named("node_keys_not_reported")
    assert "did not answer" in str(said["reason"])
    assert coordinator.puts == 0
    keys.follow()
    keys.follow()
    assert coordinator.puts == 1
    assert len(events.named("node_keys_not_reported")) == 1
