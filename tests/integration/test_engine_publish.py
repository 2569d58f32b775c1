"""The engine's publish path end to end, in process: due work, claims, admissions,
outcomes, cancels and reschedules, never early, lane isolation, recovery and stop."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from nereus.adapters.backends.destination.file_outbox import FileDestination
from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.engine.process.engine_settings import EngineSettings
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.evidence_mac import ExpectedMac
from nereus.records import MessageState
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Message, decode_value
from nereus.views import find_message
from tests.fake_clock import FakeClock, SkewedClock
from tests.integration.doubles import QuietDestination
from tests.integration.engine_harness import (
    file_lane,
    in_process_engine,
    lateness_ms,
    now_ms,
)
from tests.polling import wait_until
from tests.uncertain import make_unknown_attempt


def message_states(home: Path, partitions: int = 2) -> dict[str, Message]:
    out = {}
    for partition in range(partitions):
        path = home / "state" / "default" / str(partition)
        with ShardStore.open(path, read_only=True) as store:
            for _, raw in store.scan_prefix(keys.MSG):
                message = decode_value(raw, Message)
                out[message.delay_message_id] = message
    return out


def test_hundreds_of_messages_publish_exactly_the_non_cancelled_ones(tmp_path: Path) -> None:
    """Random delays, cancels and reschedules: exactly the survivors publish, once, on time."""
    rng = random.Random(7)
    with in_process_engine(tmp_path / "home") as h:
        base = now_ms()
        ids = [f"m{n}" for n in range(400)]
        due = {mid: base + rng.randint(300, 2_500) for mid in ids}
        h.queue([h.schedule(mid, due[mid], payload=mid.encode(), key=mid) for mid in ids])
        cancelled = set(rng.sample(ids, 80))
        moved = {mid: base + rng.randint(1_000, 3_000)
                 for mid in rng.sample(sorted(set(ids) - cancelled), 60)}
        h.queue([h.cancel(mid) for mid in sorted(cancelled)])
        h.queue([h.reschedule(mid, at) for mid, at in sorted(moved.items())])
        due.update(moved)
        survivors = set(ids) - cancelled

        def published_ids() -> set[str]:
            return {line["delay_message_id"] for line in h.outbox()}

        wait_until("all survivors to publish", lambda: survivors <= published_ids(), 30)
        # once every message is final and no shard holds a claim or a send, nothing more
        # can be published: anything wrongly published late is in the outbox by now
        loops = list(h.engine.shards.values())
        final = {MessageState.PUBLISHED, MessageState.CANCELLED}

        def settled() -> bool:
            if any(loop.status().claims or loop.status().in_flight for loop in loops):
                return False
            return all(any((m := find_message(loop.store, mid)) is not None
                           and m.state in final for loop in loops) for mid in ids)

        wait_until("every message PUBLISHED or CANCELLED, nothing in flight", settled, 30)
        lines = h.outbox()
    published = [line["delay_message_id"] for line in lines]
    # a cancel queued after a message was already admitted loses (ALREADY_ADMITTED): such a
    # message is published and NOT cancelled; every other cancelled one must be absent
    states = message_states(tmp_path / "home")
    really_cancelled = {m for m in cancelled if states[m].state == MessageState.CANCELLED}
    assert len(published) == len(set(published)), "a message was published twice"
    assert set(published) == set(ids) - really_cancelled
    assert len(really_cancelled) >= 70
    for line in lines:
        assert lateness_ms(line) >= 0, line
        assert line["payload"] == line["delay_message_id"]
        mid = line["delay_message_id"]
        if mid in moved and states[mid].generation == 2:
            assert line["deliver_at"].startswith(
                time.strftime("%Y-%m-%dT", time.gmtime(moved[mid] / 1000)))
            assert states[mid].deliver_at_ms == moved[mid]
    for mid in set(ids) - really_cancelled:
        assert states[mid].state == MessageState.PUBLISHED


class TrueTimeRecorder:
    """A file destination that also records the true (unskewed) time of each publish."""

    def __init__(self, inner: FileDestination) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_record_bytes = inner.max_record_bytes
        self.true_ms: dict[str, int] = {}

    def publish(self, requests: Sequence[PublishRequest],
                now_ms_fn: Callable[[], int]) -> list[PublishResult]:
        stamp = time.time_ns() // 1_000_000
        for request in requests:
            self.true_ms[request.template.delay_message_id] = stamp
        return self.inner.publish(requests, now_ms_fn)

    def probe(self) -> str | None:
        return self.inner.probe()

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        return self.inner.scan_evidence(wanted, since_ms, until_ms)

    def close(self) -> None:
        self.inner.close()


def test_never_early_with_a_skewed_clock(tmp_path: Path) -> None:
    """A clock off by up to its error bound (varying, either way) never publishes early."""
    rng = random.Random(11)
    error = 80
    skew = {"ms": 0}

    def drift() -> int:
        skew["ms"] = max(-error, min(error, skew["ms"] + rng.randint(-15, 15)))
        return skew["ms"]

    clock = TrustedClock(max_error_ms=error, source=SkewedClock(drift))
    home = tmp_path / "home"
    recorder = TrueTimeRecorder(FileDestination("local", home / "outbox" / "local.jsonl"))
    with in_process_engine(home, clock=clock, destinations={"local": recorder}) as h:
        base = now_ms()
        deliver = {f"n{i}": base + 200 + rng.randint(0, 1_500) for i in range(200)}
        h.queue([h.schedule(mid, at) for mid, at in deliver.items()])
        wait_until("all publishes", lambda: len(recorder.true_ms) == len(deliver), 20)
    early = {mid: deliver[mid] - t for mid, t in recorder.true_ms.items() if t < deliver[mid]}
    assert early == {}, f"published before deliverAt by the true clock: {early}"


def test_a_failing_lane_does_not_delay_a_healthy_one(tmp_path: Path) -> None:
    """A lane whose file cannot be opened goes NOT READY; the healthy lane keeps its pace."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "blocker").write_text("a file where a directory should be")
    lanes = file_lane("local", "outbox/local.jsonl") + file_lane("broken", "blocker/out.jsonl")
    with in_process_engine(home, lanes=lanes) as h:
        base = now_ms()
        h.queue([h.schedule(f"bad{i}", base + 100, lane="broken") for i in range(300)])
        h.queue([h.schedule(f"good{i}", base + 300 + 5 * i, lane="local") for i in range(200)])
        wait_until("the healthy lane to publish", lambda: len(h.outbox()) == 200, 20)
        publisher = h.engine.publishers["broken"]
        assert not publisher.ready and "blocker" in (publisher.not_ready_reason or "")
        lines = h.outbox()
    late = sorted(lateness_ms(line) for line in lines)
    assert late[0] >= 0
    assert late[int(len(late) * 0.99) - 1] < 500, f"healthy lane p99 lateness {late[-5:]} ms"
    states = message_states(home)
    broken = [states[f"bad{i}"].state for i in range(300)]
    assert set(broken) <= {MessageState.SCHEDULED, MessageState.FAILED}
    assert not (home / "blocker" / "out.jsonl").exists()


def test_restart_turns_publishing_attempts_into_uncertain(tmp_path: Path) -> None:
    """An attempt left PUBLISHING by a dead owner becomes UNKNOWN; it is not retried: a day
    later on the engine's FakeClock, a message due then has been published and the
    uncertain one still has not."""
    home = tmp_path / "home"
    # a previous owner admitted it and died before any outcome: append what it wrote
    make_unknown_attempt(home, "stuck")
    clock = FakeClock(wall_ms=now_ms())
    with in_process_engine(home, partitions=1, time_source=clock) as h:
        loop = h.engine.shards[ShardId("default", 0)]
        assert loop.epoch == 2
        state = find_message(loop.store, "stuck")
        assert state is not None and state.state == MessageState.UNCERTAIN
        clock.advance(86_400)  # any retry or backoff of "stuck" would be due by now
        h.queue([h.schedule("control", clock.wall_ms() - 1_000)])
        wait_until("the control message published", lambda: len(h.outbox()) >= 1, 10)
        assert [line["delay_message_id"] for line in h.outbox()] == ["control"]
    with ShardStore.open(home / "state" / "default" / "0", read_only=True) as store:
        raw = store.get(keys.attempt_key("ghost-attempt"))
        assert raw is not None and b"UNKNOWN" in raw and b"recovery" in raw


class BlockingDestination(QuietDestination):
    """A destination whose calls never return until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def publish(self, requests: Sequence[PublishRequest],
                now_ms_fn: Callable[[], int]) -> list[PublishResult]:
        self.entered.set()
        self.release.wait(30)
        raise RuntimeError("released after the engine gave up")

    def close(self) -> None:
        self.release.set()


def test_stop_records_a_call_in_progress_as_unknown(tmp_path: Path) -> None:
    """A producer call still running at the stop deadline is recorded UNKNOWN, not dropped."""
    home = tmp_path / "home"
    blocking = BlockingDestination()
    settings = EngineSettings(stop_timeout_s=1.0)
    with in_process_engine(home, partitions=1, destinations={"local": blocking},
                        settings=settings) as h:
        h.queue([h.schedule("slow", now_ms())])
        assert blocking.entered.wait(10)
    states = message_states(home, partitions=1)
    assert states["slow"].state == MessageState.UNCERTAIN


def test_an_unfinished_outbox_line_is_ended_before_new_lines(tmp_path: Path) -> None:
    """A line cut short by a crash does not swallow the next publish's line."""
    import json

    home = tmp_path / "home"
    (home / "outbox").mkdir(parents=True)
    (home / "outbox" / "local.jsonl").write_text('{"delay_message_id":"earlier","lane":"lo')
    with in_process_engine(home, partitions=1) as h:
        h.queue([h.schedule("after-crash", now_ms())])
        wait_until("the publish",
                   lambda: "after-crash" in (home / "outbox" / "local.jsonl").read_text(), 10)
    lines = (home / "outbox" / "local.jsonl").read_text().splitlines()
    assert lines[0] == '{"delay_message_id":"earlier","lane":"lo'
    assert json.loads(lines[1])["delay_message_id"] == "after-crash"


class LostResponseDestination:
    """Writes to the outbox like the file destination, then reports the send as UNKNOWN
    (the response was lost): evidence recovery must find the line and settle it."""

    def __init__(self, inner: FileDestination) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_record_bytes = inner.max_record_bytes

    def publish(self, requests: Sequence[PublishRequest],
                now_ms_fn: Callable[[], int]) -> list[PublishResult]:
        from nereus.records import Disposition, Outcome

        self.inner.publish(requests, now_ms_fn)
        return [PublishResult(r.attempt_id, Outcome.UNKNOWN, Disposition.NONE, "timeout")
                for r in requests]

    def probe(self) -> str | None:
        return None

    def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                      until_ms: int) -> dict[str, str]:
        return self.inner.scan_evidence(wanted, since_ms, until_ms)

    def close(self) -> None:
        pass


def test_evidence_recovery_settles_unknown_attempts_that_landed(tmp_path: Path) -> None:
    """UNKNOWN with the message in the destination: the evidence scan makes it PUBLISHED.
    The scan interval is an hour on the engine's FakeClock: the attempts stay UNCERTAIN
    until the clock is advanced an hour, then one scan settles them."""
    home = tmp_path / "home"
    lost = LostResponseDestination(FileDestination("local", home / "outbox" / "local.jsonl"))
    settings = EngineSettings(evidence_interval_s=3600)
    clock = FakeClock(wall_ms=now_ms())
    with in_process_engine(home, partitions=1, destinations={"local": lost},
                        settings=settings, time_source=clock) as h:
        h.queue([h.schedule(f"e{i}", clock.wall_ms() - 1_000) for i in range(5)])
        loop = h.engine.shards[ShardId("default", 0)]

        def in_state(state: MessageState) -> bool:
            return all((m := find_message(loop.store, f"e{i}")) is not None
                       and m.state == state for i in range(5))

        wait_until("five UNKNOWN attempts", lambda: in_state(MessageState.UNCERTAIN), 20)
        assert h.engine.evidence is not None and h.engine.evidence.settled == 0
        clock.advance(3600)
        wait_until("evidence recovery to settle the attempts",
                   lambda: in_state(MessageState.PUBLISHED), 20)
        assert h.engine.evidence is not None and h.engine.evidence.settled >= 5
    with ShardStore.open(home / "state" / "default" / "0", read_only=True) as store:
        message = find_message(store, "e0")
        assert message is not None
        from nereus.views import message_attempts

        (attempt,) = message_attempts(store, "e0")
        assert attempt.state == "PUBLISHED" and "evidence scan" in (attempt.evidence or "")
        assert len(h.outbox()) == 5  # found, not re-sent
