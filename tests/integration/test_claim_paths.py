"""Claims that end without a send, and a lane that hangs while READY.

* **Claim expiry and the decline path.** The first admission reaches the Shard Log only
  after its claim's deadline (a slow append, during which the test's FakeClock moves three
  claim TTLs on): its claim is released, the admission still wins when applied (nothing in
  the log revoked it), and this owner — the only one that could have sent it — declines
  it: NOT_PUBLISHED LANE_UNAVAILABLE "owner declined before any send". The message goes
  back to the timeline, and once the clock reaches its retry time the next attempt
  publishes it, once.
* **An admission that does not name the live claim is never sent** (seed 000 section 2:
  claimSequence checked at hand-over). Before our first admission reaches the log, a copy
  naming another claimSequence (the same attempt id: an executor replaying a stale
  preparation) is appended ahead of it and wins; the owner declines that attempt before
  any send, counts the claim revoked at hand-over, and the message publishes once, under
  its next attempt.
* **A READY lane that hangs holds only its own permits.** Its destination accepts calls
  and never returns; it keeps at most ``lane_in_flight`` claims, and a healthy lane keeps
  publishing on time from the rest of the engine's permits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.shardlog.factory import open_shard_log
from nereus.adapters.backends.shardlog.protocol import Receipt, ShardLog
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.scheduler.permits import PermitLimits
from nereus.engine.scheduler.round_plan import PlannerSettings
from nereus.engine.shard.loop_settings import LoopSettings
from nereus.records import AttemptState, Disposition, Outcome, PublishAdmission, decode, encode
from nereus.state import keys
from nereus.state.values import Attempt, decode_value
from nereus.views import find_message
from tests.fake_clock import FakeClock
from tests.integration.doubles import DelegatingLog, QuietDestination
from tests.integration.engine_harness import file_lane, in_process_engine, lateness_ms, now_ms
from tests.polling import wait_until

CLAIM_TTL_MS = 60_000  # a minute: it passes only because the FakeClock is advanced


class SlowFirstAdmission(DelegatingLog):
    """The shard's log, but the first append holding an admission takes 3 claim TTLs of
    ``clock`` (advanced here, on the loop's thread, before the append goes through)."""

    def __init__(self, inner: ShardLog, clock: FakeClock) -> None:
        super().__init__(inner)
        self.clock = clock
        self.slowed = threading.Event()

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        if not self.slowed.is_set() and any(isinstance(decode(p), PublishAdmission)
                                            for p in payloads):
            self.slowed.set()
            self.clock.advance(3 * CLAIM_TTL_MS / 1000)  # the slow broker this test is about
        return self.inner.append(payloads)


@pytest.mark.timeout(60)
def test_an_admission_applied_after_its_claim_expired_is_declined_then_retried(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """First attempt: declined before any send (its one-minute claim expired on the
    FakeClock); the message waits for its retry time, which the test reaches by advancing
    the clock; second attempt: PUBLISHED; the destination saw the message once. Two claims
    were counted, one of them revoked at its deadline."""
    from nereus.engine.process import home_engine as engine_module

    clock = FakeClock(wall_ms=now_ms())
    monkeypatch.setattr(engine_module, "open_shard_log",
                        lambda *a, **k: SlowFirstAdmission(open_shard_log(*a, **k), clock))
    settings = EngineSettings(loop=LoopSettings(planner=PlannerSettings(
        claim_ttl_ms=CLAIM_TTL_MS)))
    home = tmp_path / "home"
    with in_process_engine(home, partitions=1, settings=settings, time_source=clock) as h:
        (loop,) = h.engine.shards.values()
        h.queue([h.schedule("m1", clock.wall_ms() - 1_000)])
        wait_until("m1 back on the timeline after the decline",
                   lambda: (m := find_message(loop.store, "m1")) is not None
                   and m.unavailable == 1, 30)
        retry = find_message(loop.store, "m1")
        assert retry is not None and retry.state == "SCHEDULED" and h.outbox() == []
        clock.advance((retry.action_at_ms - clock.wall_ms()) / 1000 + 1)
        wait_until("m1 PUBLISHED after the decline",
                   lambda: (m := find_message(loop.store, "m1")) is not None
                   and m.state == "PUBLISHED", 30)
        attempts = sorted((decode_value(raw, Attempt) for _, raw in
                           loop.store.scan_prefix(keys.ATTEMPT)), key=lambda a: a.attempt_no)
        message = find_message(loop.store, "m1")
        revocations, claims = dict(loop.metrics.revocations), dict(loop.metrics.claims)
    assert revocations == {("local", "deadline"): 1} and claims == {"local": 2}
    assert [a.state for a in attempts] == [AttemptState.NOT_PUBLISHED, AttemptState.PUBLISHED]
    first = attempts[0]
    assert first.disposition == Disposition.LANE_UNAVAILABLE
    assert "owner declined before any send" in first.evidence
    assert "claim" in first.evidence
    assert message is not None and message.unavailable == 1 and message.retries == 0
    assert [line["attempt_id"] for line in h.outbox()] == [attempts[1].attempt_id]


class ForgedFirst(DelegatingLog):
    """The shard's log; before the first append holding one of our admissions, a copy of
    that admission naming another claimSequence is appended (and so applied) first."""

    def __init__(self, inner: ShardLog) -> None:
        super().__init__(inner)
        self.forged: PublishAdmission | None = None

    def append(self, payloads: Sequence[bytes]) -> list[Receipt]:
        if self.forged is None:
            ours = [rec for p in payloads if isinstance(rec := decode(p), PublishAdmission)]
            if ours:
                self.forged = msgspec.structs.replace(
                    ours[0], claim_sequence=ours[0].claim_sequence + 1_000)
                self.inner.append([encode(self.forged)])
        return self.inner.append(payloads)


@pytest.mark.timeout(60)
def test_an_admission_that_does_not_name_the_live_claim_is_never_sent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forged admission wins in the log, but names claimSequence N+1000 where the live
    claim has N: its attempt is NOT_PUBLISHED LANE_UNAVAILABLE "owner declined before any
    send", naming both sequences, and never reaches the destination; the claim counts as
    revoked at hand-over (apart from admissions), and the message's next attempt publishes
    it, once."""
    from nereus.engine.process import home_engine as engine_module

    logs: list[ForgedFirst] = []

    def forging(*args: Any, **kwargs: Any) -> ShardLog:
        logs.append(ForgedFirst(open_shard_log(*args, **kwargs)))
        return logs[-1]

    monkeypatch.setattr(engine_module, "open_shard_log", forging)
    home = tmp_path / "home"
    with in_process_engine(home, partitions=1) as h:
        (loop,) = h.engine.shards.values()
        h.queue([h.schedule("m1", now_ms() - 1_000)])
        wait_until("m1 PUBLISHED by its next attempt",
                   lambda: (m := find_message(loop.store, "m1")) is not None
                   and m.state == "PUBLISHED", 30)
        attempts = sorted((decode_value(raw, Attempt) for _, raw in
                           loop.store.scan_prefix(keys.ATTEMPT)), key=lambda a: a.attempt_no)
        metrics = loop.metrics
        lines = h.outbox()
    forged = logs[0].forged
    assert forged is not None
    first, second = attempts
    assert first.attempt_id == forged.attempt_id
    assert (first.state, first.disposition) == (AttemptState.NOT_PUBLISHED,
                                                Disposition.LANE_UNAVAILABLE)
    assert "owner declined before any send" in first.evidence
    assert f"claimSequence {forged.claim_sequence}" in first.evidence
    assert f"claimSequence {forged.claim_sequence - 1_000}" in first.evidence
    assert [line["attempt_id"] for line in lines] == [second.attempt_id]
    assert second.state == AttemptState.PUBLISHED
    assert metrics.revocations == {("local", "handover"): 1}
    assert metrics.claims == {"local": 2}
    assert sum(metrics.claim_latency["local"].counts) == 2


class Hung(QuietDestination):
    """A destination that is READY and never answers until released."""

    name = "hung"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def publish(self, requests: Sequence[PublishRequest],
                now: Callable[[], int]) -> list[PublishResult]:
        self.calls += 1
        self.release.wait(60)
        return [PublishResult(r.attempt_id, Outcome.PUBLISHED, Disposition.NONE, "late")
                for r in requests]

    def close(self) -> None:
        self.release.set()


@pytest.mark.timeout(90)
def test_a_ready_lane_that_hangs_holds_only_its_own_permits(tmp_path: Path) -> None:
    """100 due on a hanging READY lane, 200 on a healthy one: the hung lane holds at most
    lane_in_flight claims, the healthy lane publishes all on time (p99 under 500 ms)."""
    hung = Hung()
    settings = EngineSettings(permits=PermitLimits(worker=40, lane=20))
    lanes = file_lane("local", "outbox/local.jsonl") + '[lanes.hung]\ndestination = "file"\n' \
        'path = "outbox/hung.jsonl"\n'
    home = tmp_path / "home"
    with in_process_engine(home, lanes=lanes, settings=settings,
                        destinations={"hung": hung}) as h:
        base = now_ms()
        h.queue([h.schedule(f"stuck{i}", base, lane="hung") for i in range(100)])
        wait_until("the hung lane's first call", lambda: hung.calls >= 1, 10)
        h.queue([h.schedule(f"good{i}", base + 500 + 5 * i) for i in range(200)])
        peak: list[int] = []

        def healthy_done() -> bool:
            peak.append(h.engine.permits.in_flight("hung"))
            return len(h.outbox()) == 200

        wait_until("the healthy lane to publish", healthy_done, 30)
        assert h.engine.publishers["hung"].ready, "the hanging lane is READY all along"
        assert max(peak) <= 20, f"the hung lane held {max(peak)} permits"
        lines: list[dict[str, Any]] = h.outbox()
        hung.release.set()
    late = sorted(lateness_ms(line) for line in lines)
    assert late[0] >= 0
    assert late[int(len(late) * 0.99) - 1] < 500, f"healthy lane p99 lateness {late[-5:]} ms"
