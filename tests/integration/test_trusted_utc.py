"""Trusted UTC is earned, not assumed.

* an untrusted clock (chrony not synchronised, a leap second pending) stops admissions with
  a visible reason while lanes stay OPEN, and publishing resumes once it is trusted;
* a restarted owner's clock never reads earlier than the last applied admission's decision;
* with a broker clock of its own (Kafka ``LogAppendTime``), an engine clock skewed *beyond*
  the allowed lead (1 s) publishes nothing early: its admissions are refused as
  ``TIME_EVIDENCE`` and the shard says why it waits. (The file log's record times are the
  writing host's clock, the engine's own: there, a skew is not detectable; docs/rules.md.)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from nereus.adapters.backends.destination.file_outbox import FileDestination
from nereus.adapters.backends.destination.protocol import PublishRequest, PublishResult
from nereus.adapters.backends.kafka.kafka_log import KafkaShardLog
from nereus.client import RouteRef, prepare_schedule
from nereus.config import parse_config
from nereus.engine.runtime.trusted_clock import ClockReport, TrustedClock
from nereus.engine.shard.owner_loop import ShardLoop
from nereus.records import Gate
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.values import Lane, Result, decode_value
from tests.fake_clock import SkewedClock
from tests.integration.doubles import QuietDestination
from tests.integration.engine_harness import in_process_engine, now_ms
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.polling import wait_until


class TrueTimeFile(QuietDestination):
    """The file destination, noting the true (unskewed) time of every publish."""

    def __init__(self, path: Path) -> None:
        self.file = FileDestination("local", path)
        self.true_ms: dict[str, int] = {}
        self.deliver_ms: dict[str, int] = {}

    def publish(self, requests: Sequence[PublishRequest],
                now: Callable[[], int]) -> list[PublishResult]:
        stamp = now_ms()
        for request in requests:
            self.true_ms[request.template.delay_message_id] = stamp
            self.deliver_ms[request.template.delay_message_id] = request.template.deliver_at_ms
        return self.file.publish(requests, now)


class Switchable:
    """A time source whose trust the test switches (chrony's report, stood in for)."""

    def __init__(self, problem: str | None) -> None:
        self.problem = problem

    def __call__(self) -> ClockReport:
        return ClockReport(0, self.problem)


def test_an_untrusted_clock_stops_admissions_and_says_why(tmp_path: Path) -> None:
    """Not synchronised: nothing admitted, the lane stays OPEN, the shard's waiting reason
    names the problem; synchronised again: the due message is published."""
    health = Switchable("chrony reports the clock is not synchronised")
    clock = TrustedClock(max_error_ms=20, health=health)
    home = tmp_path / "home"
    with in_process_engine(home, partitions=1, clock=clock) as h:
        (loop,) = h.engine.shards.values()
        h.queue([h.schedule("m1", now_ms() - 1)])
        wait_until("the shard to say why it waits",
                   lambda: loop.waiting is not None and "not synchronised" in loop.waiting, 10)
        wait_until("m1 applied", lambda: loop.store.get(keys.msg_key("m1")) is not None, 10)
        assert h.outbox() == [] and loop.admissions == 0
        assert loop.lanes()["local"].gate == Gate.OPEN
        health.problem = None
        wait_until("m1 published once trusted", lambda: len(h.outbox()) == 1, 10)
        assert loop.waiting is None


def test_a_restarted_owner_never_reads_earlier_than_its_last_decision(tmp_path: Path) -> None:
    """Published under the true clock; restarted with the wall clock a minute behind: the
    first reading is not earlier than the decision the applied admission carries."""
    home = tmp_path / "home"
    with in_process_engine(home, partitions=1) as h:
        h.queue([h.schedule("m1", now_ms() - 1)])
        wait_until("m1 published", lambda: len(h.outbox()) == 1, 10)
        (loop,) = h.engine.shards.values()
        raw = loop.store.get(keys.lane_key("local"))
        assert raw is not None
        decided = decode_value(raw, Lane).last_decided_ms
        assert decided > 0
    behind = TrustedClock(max_error_ms=20, source=SkewedClock(lambda: -60_000))
    with in_process_engine(home, partitions=1, clock=behind) as h:
        assert h.engine.clock is not None
        assert h.engine.clock.now().earliest_ms >= decided


KAFKA_CONFIG = """
[routes.default]
log = "kafka"
bootstrap = "{bootstrap}"
topic = "{topic}"
partitions = 1

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"
"""
SKEW_MS = 3_000  # the engine clock leads true (and broker) time by this: beyond the 1 s bound


@pytest.mark.timeout(180)
def test_a_clock_skewed_beyond_the_bound_publishes_nothing_early_on_kafka(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """Engine clock 3 s ahead, Shard Log on Kafka (LogAppendTime): messages due by the
    engine's clock are refused (TIME_EVIDENCE) until true time, the shard says why; a
    correctly clocked engine then publishes them, and not one was published early."""
    bootstrap = kafka_service.require()
    topic = f"nereus.skew-{uuid.uuid4().hex[:10]}.commands"
    home = tmp_path / "home"
    home.mkdir()
    text = KAFKA_CONFIG.format(bootstrap=bootstrap, topic=topic)
    (home / "nereus.toml").write_text(text)
    config = parse_config(text, source=str(home / "nereus.toml"))
    destination = TrueTimeFile(home / "outbox" / "local.jsonl")
    skewed = TrustedClock(max_error_ms=20, source=SkewedClock(lambda: SKEW_MS))
    route = RouteRef("default", 1)
    base = now_ms() + 4_000
    ids = [f"m{n}" for n in range(10)]
    last_due = base + (len(ids) - 1) * 200
    with in_process_engine(home, config=config, clock=skewed,
                           destinations={"local": destination}) as h:
        log = KafkaShardLog(bootstrap, topic, 0, partitions=1, create=False)
        log.append([prepare_schedule(route, command_id=f"s-{mid}", delay_message_id=mid,
                                     lane="local", deliver_at_ms=base + n * 200,
                                     payload=b"x").data for n, mid in enumerate(ids)])
        loop = h.engine.shards[ShardId("default", 0)]
        wait_until("the shard to say why it waits",
                   lambda: bool(loop.waiting) and "leads the Shard Log's broker clock"
                   in str(loop.waiting), 30)
        # every message is due by true time too before the skewed engine stops
        wait_until("true time past every deliverAt", lambda: now_ms() > last_due + 500, 30)
        assert [r for r in _results(loop) if r.reason == "TIME_EVIDENCE"], (
            "no admission was refused as clock-ahead")
    early_while_skewed = dict(destination.true_ms)
    assert early_while_skewed == {}, "published while the engine clock was 3 s ahead"
    try:
        with in_process_engine(home, config=config, destinations={"local": destination}):
            wait_until("every message published by a correctly clocked engine",
                       lambda: len(destination.true_ms) == len(ids), 30)
    finally:
        log.close()
    early = {mid: destination.deliver_ms[mid] - at for mid, at in destination.true_ms.items()
             if at < destination.deliver_ms[mid]}
    assert early == {}, f"published early (ms): {early}"




def _results(loop: ShardLoop) -> list[Result]:
    return [decode_value(raw, Result) for _, raw in loop.store.scan_prefix(keys.RESULT)]
