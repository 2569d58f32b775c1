"""An on-time admission is not rewritten by a decline (seed 000 §4), under a running
engine: a message whose first attempt never reached its destination (the destination
answered NOT_PUBLISHED LANE_UNAVAILABLE) goes back on the timeline past its expireAt and
is still published, not EXPIRED."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.records import Disposition, MessageState, Outcome
from nereus.views import find_message
from tests.integration.doubles import QuietDestination
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until


class DeclinesFirstSend(QuietDestination):
    """A file destination whose first call answers NOT_PUBLISHED LANE_UNAVAILABLE (the
    message never left) and whose later calls publish."""

    def __init__(self, path: Path) -> None:
        from nereus.adapters.backends.destination.file_outbox import FileDestination

        self.file = FileDestination("local", path)
        self.declined = threading.Event()

    def publish(self, requests: Sequence[PublishRequest], now: Any) -> list[PublishResult]:
        if not self.declined.is_set():
            self.declined.set()
            return [PublishResult(r.attempt_id, Outcome.NOT_PUBLISHED,
                                  Disposition.LANE_UNAVAILABLE, "never left, for the test")
                    for r in requests]
        return self.file.publish(requests, now)


@pytest.mark.timeout(120)
def test_a_declined_on_time_admission_is_published_after_expire_at(tmp_path: Path) -> None:
    """Due in 300 ms, expiring 200 ms later; its first attempt is declined and its retry
    (1 s backoff) comes after expireAt: the message is PUBLISHED once, with two attempts
    (before, the engine expired it)."""
    home = tmp_path / "home"
    destination = DeclinesFirstSend(home / "outbox" / "local.jsonl")
    with in_process_engine(home, partitions=1, destinations={"local": destination}) as h:
        due = now_ms() + 300
        h.queue([h.schedule("m1", due, expire_at_ms=due + 200)])
        (loop,) = h.engine.shards.values()

        def settled() -> str | None:
            message = find_message(loop.store, "m1")
            return None if message is None or message.state == MessageState.SCHEDULED \
                else message.state

        wait_until("m1 settled", lambda: settled() not in (None, MessageState.PUBLISHING), 30)
        message = find_message(loop.store, "m1")
        assert message is not None
        assert (message.state, message.attempts) == (MessageState.PUBLISHED, 2), message
        lines = h.outbox()
    assert destination.declined.is_set()
    assert [line["delay_message_id"] for line in lines] == ["m1"]
