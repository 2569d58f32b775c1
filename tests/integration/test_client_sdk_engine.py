"""The producer SDK against a running engine (``nereus engine start``) on the file log,
Kafka and Pulsar: schedule -> APPLIED -> PUBLISHED, a cancel that wins before admission,
LANE_FULL as a typed error, a result not known in time, a retry after a lost
acknowledgement that is one command, and many concurrent asyncio schedules (Kafka)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from nereus.adapters.client.appends import RouteAppends
from nereus.adapters.client.route_source import from_home
from nereus.client import (
    AsyncDelayClient,
    Batching,
    DelayClient,
    LaneFull,
    Prepared,
    Receipt,
    ResultPending,
    RetryPolicy,
)
from nereus.errors import ExitCode, ServiceUnreachable
from tests.daemon import read_outbox, running_engine
from tests.integration.broker_homes import kafka_lane, kafka_route, write_home
from tests.integration.kafka_service import KafkaService, kafka_service  # noqa: F401
from tests.integration.pulsar_service import PulsarService, pulsar_service  # noqa: F401
from tests.integration.test_e2e_brokers import Consume, kafka_consumer, pulsar_consumer
from tests.polling import wait_until

FILE_HOME = """[routes.default]
log = "file"
partitions = 1

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"

[lanes.small]
destination = "file"
path = "outbox/small.jsonl"
max_pending = 1
"""


def test_file_log_schedule_publish_cancel_and_lane_full(tmp_path: Path) -> None:
    """On the file log: a schedule is QUEUED, APPLIED, then PUBLISHED to its lane; a cancel
    before admission wins; a second message into a full lane raises LaneFull (exit 1); a
    command the shard never saw is ResultPending (exit 6) once the wait runs out."""
    home = tmp_path / "home"
    write_home(home, FILE_HOME)
    with running_engine(home), DelayClient.from_home(home) as client:
        soon = client.schedule("m1", "local", delay="200ms", payload=b"hello")
        assert soon.evidence == "QUEUED"
        assert client.result(soon, wait=30).outcome == "APPLIED"
        later = client.schedule("m2", "local", delay="1h")
        cancelled = client.result(client.cancel("m2"), wait=30)
        assert (cancelled.outcome, cancelled.state) == ("APPLIED", "CANCELLED")
        wait_until("m1 published", lambda: client.get("m1").state == "PUBLISHED", 30)
        assert [line["delay_message_id"] for line in read_outbox(home / "outbox/local.jsonl")] \
            == ["m1"]
        assert client.get("m2").state == "CANCELLED" and later.shard == soon.shard

        client.result(client.schedule("s1", "small", delay="1h"), wait=30)
        with pytest.raises(LaneFull) as full:
            client.result(client.schedule("s2", "small", delay="1h"), wait=30)
        assert full.value.exit_code == ExitCode.NO and full.value.reason == "LANE_FULL"

        never = Receipt.queued(kind="CANCEL", delay_message_id="x", command_id="never-sent",
                               shard="default/0", position=999, broker_ms=0)
        with pytest.raises(ResultPending) as pending:
            client.result(never, wait=0.05)
        assert pending.value.exit_code == ExitCode.RESULT_NOT_KNOWN


def lost_first_ack(real: Callable[[Sequence[Prepared]], list[Receipt]]
                   ) -> Callable[[Sequence[Prepared]], list[Receipt]]:
    """Appends whose first acknowledgement is lost: the records land in the log, the
    caller hears an outage (a broker that went away before it answered)."""
    calls: list[int] = []

    def append(batch: Sequence[Prepared]) -> list[Receipt]:
        receipts = real(batch)
        calls.append(len(batch))
        if len(calls) == 1:
            raise ServiceUnreachable("the broker went away before it acknowledged")
        return receipts

    return append


def broker_scenario(home: Path, consume: Consume) -> None:
    """Straight to the Command Topic (``via="log"``), three messages: ``a`` plainly;
    ``lost`` whose first append's acknowledgement is lost, so the client appends the same
    command again (two copies in the log, applied once: ``duplicate_of``); ``c`` cancelled
    before its time. A consumer sees ``a`` and
    ``lost`` once each, never ``c``."""
    source = from_home(home, "default")
    retry = RetryPolicy(attempts=3, initial_backoff_s=0.05)
    lossy_append = lost_first_ack(RouteAppends(source, "log"))
    with DelayClient(source, retry=retry, append=lossy_append) as lossy:
        lost = lossy.schedule("lost", "out", delay="1s", payload=b"once")
        assert lossy.sender.appends == 2
        applied = lossy.result(lost, wait=60)
    assert applied.outcome == "APPLIED"
    assert applied.receipt.duplicate_of is not None, "the first copy was the one applied"
    with DelayClient.from_home(home, via="log") as client:
        plain = client.schedule("a", "out", delay="1s", payload=b"a")
        cancel_me = client.schedule("c", "out", delay="1h")
        client.result(cancel_me, wait=60)
        assert client.result(client.cancel("c"), wait=60).state == "CANCELLED"
        assert client.result(plain, wait=60).outcome == "APPLIED"
        seen = consume({"a", "lost"}, 60.0)
        assert {m: len(t) for m, t in seen.items()} == {"a": 1, "lost": 1}
        assert client.get("lost").state == "PUBLISHED"


def test_kafka_schedule_cancel_a_lost_ack_retried_once_and_asyncio(
        tmp_path: Path, kafka_service: KafkaService) -> None:  # noqa: F811
    """The scenario of ``broker_scenario`` with the Command Topic and the lane on Kafka;
    then 300 tasks schedule at once through one AsyncDelayClient: each is QUEUED (in far
    fewer appends than commands), and every tenth is seen APPLIED."""
    bootstrap = kafka_service.require()
    run = uuid.uuid4().hex[:8]
    home = tmp_path / "home"
    write_home(home, kafka_route(bootstrap, f"nereus.sdk-{run}.commands", 2),
               kafka_lane("out", bootstrap, f"sdk-out-{run}"))
    consume = kafka_consumer(bootstrap, f"sdk-out-{run}")
    with running_engine(home):
        broker_scenario(home, consume)
        appends = asyncio.run(asyncio.wait_for(many_at_once(home, 300), 120))
    assert appends < 100


async def many_at_once(home: Path, count: int) -> int:
    """``count`` concurrent schedules, then their results; the appends they took."""
    async with AsyncDelayClient.from_home(home, batching=Batching(linger_s=0.01),
                                          via="log") as client:
        receipts = await asyncio.gather(*(
            client.schedule(f"many-{n}", "out", delay="1h") for n in range(count)))
        assert {r.evidence for r in receipts} == {"QUEUED"}
        # every tenth: on Kafka each result costs the engine's admin answers (100-300 ms)
        results = await asyncio.gather(*(client.result(r, wait=60) for r in receipts[::10]))
        assert {r.outcome for r in results} == {"APPLIED"}
        return client.sync.sender.appends


def test_pulsar_schedule_cancel_and_a_lost_ack_retried_once(
        tmp_path: Path, pulsar_service: PulsarService) -> None:  # noqa: F811
    """The scenario of ``broker_scenario`` with the Command Topic and the lane on Pulsar."""
    endpoint = pulsar_service.require()
    run = uuid.uuid4().hex[:8]
    home = tmp_path / "home"
    out = f"persistent://public/default/sdk-out-{run}"
    write_home(home, f"""[routes.default]
log = "pulsar"
service_url = "{endpoint.service_url}"
admin_url = "{endpoint.admin_url}"
topic = "nereus-sdk-{run}-commands"
partitions = 2

[lanes.out]
destination = "pulsar"
service_url = "{endpoint.service_url}"
topic = "{out}"
""")
    consume = pulsar_consumer(endpoint.service_url, out)
    with running_engine(home):
        broker_scenario(home, consume)
