"""The producer gate reads the applied activation: a fenced owner sends nothing more.

An in-process engine owns one shard. While its lane publisher is inside a destination call
(held open by the test) and more admitted attempts wait behind it, another owner's
ACTIVATION_BARRIER with the next epoch is appended to the Shard Log. Once the loop applies
it, this owner is fenced: the waiting attempts are declined at the publisher's gate and
never reach the destination, the loop stops claiming and lets the shard go (state FENCED,
its worker ends), and its declines are only recorded (a fenced owner's outcome is
evidence, never a downgrade).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.engine.runtime.supervisor import WorkerState
from nereus.records import ActivationBarrier, AttemptState, Disposition, Outcome, encode
from nereus.state import keys
from nereus.state.values import Attempt, decode_value
from tests.integration.doubles import QuietDestination
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.polling import wait_until


class HeldDestination(QuietDestination):
    """Records what reaches it; each call waits until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.in_call = threading.Event()
        self.sent: list[str] = []

    def publish(self, requests: Sequence[PublishRequest],
                now: Callable[[], int]) -> list[PublishResult]:
        self.sent.extend(r.template.delay_message_id for r in requests)
        self.in_call.set()
        self.release.wait(30)
        return [PublishResult(r.attempt_id, Outcome.PUBLISHED, Disposition.NONE, "held@0")
                for r in requests]

    def close(self) -> None:
        self.release.set()


@pytest.mark.timeout(120)
def test_a_newer_barrier_stops_every_further_producer_call(tmp_path: Path) -> None:
    """Attempts queued behind the call in progress never reach the destination once another
    owner's barrier is applied; the loop ends FENCED and claims nothing more."""
    destination = HeldDestination()
    home = tmp_path / "home"
    with in_process_engine(home, partitions=1, destinations={"local": destination}) as h:
        (loop,) = h.engine.shards.values()
        h.queue([h.schedule("m0", now_ms() - 1)])
        assert destination.in_call.wait(20), "the first publish never started"
        h.queue([h.schedule(f"m{n}", now_ms() - 1) for n in range(1, 5)])
        wait_until("four more attempts handed to the lane", lambda: loop.in_flight == 5, 20)
        log = FileShardLog(h.layout.shard_log(loop.shard))
        try:
            log.append([encode(ActivationBarrier(barrier_id="takeover", owner_id="other-node",
                                                 fencing_epoch=loop.epoch + 1))])
        finally:
            log.close()
        wait_until("the loop to see the newer barrier", lambda: loop.state == "FENCED", 20)
        destination.release.set()

        def worker_state() -> WorkerState:
            return next(w for w in h.engine.workers() if w.kind == "shard").state

        wait_until("the fenced loop to let the shard go",
                   lambda: worker_state() == WorkerState.STOPPED, 20)
        assert destination.sent == ["m0"], "a fenced owner called the producer"
        assert "other-node" in (loop.live_owner_gate() or "")
        attempts = [decode_value(v, Attempt) for _, v in loop.store.scan_prefix(keys.ATTEMPT)]
        waiting = [a for a in attempts if a.delay_message_id != "m0"]
        assert len(waiting) == 4
        # the declines were a fenced owner's outcomes: kept as evidence, not applied
        assert all(a.state == AttemptState.PUBLISHING for a in waiting), waiting
        assert all(a.late_outcomes and "fenced" in a.late_outcomes[0].evidence
                   for a in waiting), waiting
    assert destination.sent == ["m0"]
