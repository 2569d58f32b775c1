"""The producer SDK without an engine (``nereus.client.DelayClient``, ``AsyncDelayClient``):
the route learned from its identity record, input refused before any I/O with the CLI's
blame, batching, and retries that resend the prepared command's own bytes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nereus.adapters.backends.shardlog.file_log import FileShardLog
from nereus.adapters.backends.shardlog.identity import RouteMismatch
from nereus.adapters.client.appends import RouteAppends
from nereus.adapters.client.sender import Batching
from nereus.client import AsyncDelayClient, DelayClient, Prepared, Receipt, RouteRef
from nereus.client.errors import InvalidInput, RouteUnreachable, UnknownLane
from nereus.client.retry import RetryPolicy
from nereus.errors import EngineUnreachable, ExitCode, NereusError, ServiceUnreachable
from nereus.records import RouteIdentity, decode, encode

CONFIG = """[routes.default]
id = "route-a"
log = "file"
partitions = {partitions}

[lanes.local]
destination = "file"
path = "outbox/local.jsonl"

[lanes.ordered]
destination = "file"
path = "outbox/ordered.jsonl"
ordered = true

[shard]
max_inline_payload_bytes = 1024
max_payload_bytes = 4096
max_headers = 2
"""
FAST = RetryPolicy(attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02, deadline_s=10)
AT = datetime(2030, 1, 1, tzinfo=UTC)


def make_home(root: Path, partitions: int = 1) -> Path:
    home = root / "home"
    home.mkdir()
    (home / "nereus.toml").write_text(CONFIG.format(partitions=partitions))
    return home


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return make_home(tmp_path)


@pytest.fixture
def client(home: Path) -> Iterator[DelayClient]:
    with DelayClient.from_home(home, retry=FAST) as made:
        yield made


def wrapped(home: Path, wrap: Callable[[Callable[[Sequence[Prepared]], list[Receipt]],
                                        Sequence[Prepared]], list[Receipt]],
            **options: object) -> DelayClient:
    """A client whose appends go through ``wrap(real_append, commands)``."""
    from nereus.adapters.client.route_source import from_home

    source = from_home(home, "default")
    real = RouteAppends(source)
    return DelayClient(source, retry=FAST, append=lambda batch: wrap(real, batch),
                       **options)  # type: ignore[arg-type]


def test_route_is_learned_from_its_identity_record(tmp_path: Path) -> None:
    """Partitions and route id come from the identity at each partition's head (written
    to an empty log first), ORDERED lanes from the configuration: nothing by hand."""
    home = make_home(tmp_path, partitions=3)
    with DelayClient.from_home(home) as client:
        assert client.route == RouteRef("default", 3, frozenset({"ordered"}),
                                        route_id="route-a")
    log = FileShardLog(home / "shardlog" / "default" / "0")
    assert decode(log.read(0, 1)[0].payload) == RouteIdentity(
        route_id="route-a", route="default", partition=0, partitions=3)
    log.close()


def test_another_routes_log_is_refused(home: Path) -> None:
    """A partition whose first record is another route's identity is never appended to."""
    log = FileShardLog(home / "shardlog" / "default" / "0")
    log.append([encode(RouteIdentity(route_id="route-b", route="default", partition=0,
                                     partitions=1))])
    log.close()
    with DelayClient.from_home(home) as client, pytest.raises(RouteMismatch):
        client.schedule("m1", "local", deliver_at=AT)


@pytest.mark.parametrize(("call", "error", "field"), [
    (lambda c: c.schedule("", "local", deliver_at=AT), InvalidInput, "id"),
    (lambda c: c.schedule(" m1", "local", deliver_at=AT), InvalidInput, "id"),
    (lambda c: c.schedule("m\u200b1", "local", deliver_at=AT), InvalidInput, "id"),
    (lambda c: c.schedule("m1", "local", deliver_at=datetime(2030, 1, 1)), InvalidInput,
     "deliver_at"),
    (lambda c: c.schedule("m1", "local", deliver_at=AT, delay="5s"), InvalidInput,
     "deliver_at"),
    (lambda c: c.schedule("m1", "local"), InvalidInput, "deliver_at"),
    (lambda c: c.schedule("m1", "local", delay="soon"), InvalidInput, "delay"),
    (lambda c: c.schedule("m1", "local", delay=timedelta(seconds=-1)), InvalidInput, "delay"),
    (lambda c: c.schedule("m1", "local", deliver_at=AT, expire_at=AT - timedelta(hours=1)),
     InvalidInput, "expire_at"),
    (lambda c: c.schedule("m1", "bad lane", deliver_at=AT), InvalidInput, "lane"),
    (lambda c: c.schedule("m1", "nowhere", deliver_at=AT), UnknownLane, None),
    (lambda c: c.schedule("m1", "local", deliver_at=AT, headers={"a": "1", "b": "2", "c": "3"}),
     InvalidInput, "headers"),
    (lambda c: c.schedule("m1", "local", deliver_at=AT, key="\ud800"), InvalidInput, "key"),
    (lambda c: c.schedule("m1", "local", deliver_at=AT, payload=b"x" * 5000), InvalidInput,
     "payload"),
    (lambda c: c.schedule("m1", "local", deliver_at=AT, command_id="a\nb"), InvalidInput,
     "command_id"),
    (lambda c: c.reschedule("m1", delay="-5s"), InvalidInput, "delay"),
    (lambda c: c.cancel("\x00"), InvalidInput, "id"),
])
def test_bad_input_is_refused_before_any_io(
        home: Path, client: DelayClient, call: Callable[[DelayClient], object],
        error: type[NereusError], field: str | None) -> None:
    """Each rule the shard (and the CLI) applies refuses the call with a typed error naming
    the argument and the CLI's exit code, before the route is opened."""
    with pytest.raises(error) as raised:
        call(client)
    assert raised.value.exit_code == (ExitCode.NOT_FOUND if error is UnknownLane
                                      else ExitCode.USAGE)
    if field is not None:
        assert isinstance(raised.value, InvalidInput) and raised.value.field == field
    assert not (home / "shardlog").exists(), "nothing was appended, not even the identity"


def test_a_schedule_is_queued_and_prepares_to_the_same_bytes(client: DelayClient) -> None:
    """A QUEUED receipt names the shard and source position; the same schedule prepared
    again is the same command (id and bytes), so a retry of it is applied once."""
    receipt = client.schedule("m1", "local", deliver_at=AT, payload=b"hi", key="k",
                              headers={"h": "v"})
    assert (receipt.evidence, receipt.shard, receipt.source_position) == ("QUEUED",
                                                                          "default/0", 1)
    again = client.prepare_schedule("m1", "local", deliver_at=AT, payload=b"hi", key="k",
                                    headers={"h": "v"})
    assert again.command_id == receipt.command_id
    assert client.queue(again).source_position == 2  # the same bytes, appended again


def test_commands_gather_into_one_append_while_one_is_in_flight(home: Path) -> None:
    """While an append runs, the commands sent meanwhile wait and go as ONE next append."""
    entered, release = threading.Event(), threading.Event()
    sizes: list[int] = []

    def held(real: Callable[[Sequence[Prepared]], list[Receipt]],
             batch: Sequence[Prepared]) -> list[Receipt]:
        sizes.append(len(batch))
        if len(sizes) == 1:
            entered.set()
            release.wait(30)
        return real(batch)

    with wrapped(home, held, batching=Batching(linger_s=0)) as client:
        first = client.send([client.prepare_schedule("m0", "local", deliver_at=AT)])
        assert entered.wait(30)
        rest = client.send([client.prepare_schedule(f"m{n}", "local", deliver_at=AT)
                            for n in range(1, 50)])
        release.set()
        receipts = [f.result(30) for f in first + rest]
    assert sizes == [1, 49]
    assert [r.source_position for r in receipts] == list(range(1, 51))


def test_one_client_serves_many_threads(client: DelayClient) -> None:
    """Eight threads schedule through one client at once: every call gets its own receipt
    and every command lands once (distinct, gapless positions)."""
    receipts: list[Receipt] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        try:
            for n in range(25):
                receipt = client.schedule(f"t{index}-{n}", "local", deliver_at=AT)
                with lock:
                    receipts.append(receipt)
        except BaseException as exc:  # the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(r.source_position for r in receipts) == list(range(1, 201))
    assert len({r.delay_message_id for r in receipts}) == 200


def test_a_failed_append_is_retried_with_the_same_bytes(home: Path) -> None:
    """The broker did not answer twice: the third append sends exactly the same bytes."""
    seen: list[list[bytes]] = []

    def flaky(real: Callable[[Sequence[Prepared]], list[Receipt]],
              batch: Sequence[Prepared]) -> list[Receipt]:
        seen.append([p.data for p in batch])
        if len(seen) < 3:
            raise ServiceUnreachable("broker down")
        return real(batch)

    with wrapped(home, flaky) as client:
        receipt = client.schedule("m1", "local", deliver_at=AT)
        assert client.sender.appends == 3
    assert receipt.evidence == "QUEUED"
    assert seen[0] == seen[1] == seen[2]


def test_a_spent_policy_raises_with_the_prepared_command(home: Path) -> None:
    """When the policy is spent the error (exit 5) carries the prepared command; queued
    later, it is the same command id."""
    down = True

    def outage(real: Callable[[Sequence[Prepared]], list[Receipt]],
               batch: Sequence[Prepared]) -> list[Receipt]:
        if down:
            raise ServiceUnreachable("broker down")
        return real(batch)

    with wrapped(home, outage) as client:
        with pytest.raises(RouteUnreachable) as raised:
            client.schedule("m1", "local", deliver_at=AT)
        assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
        assert raised.value.attempts == FAST.attempts
        (prepared,) = raised.value.prepared
        down = False
        receipt = client.queue(prepared)
    assert receipt.command_id == prepared.command_id


def test_an_error_that_is_not_an_outage_is_not_retried(home: Path) -> None:
    """A refusal (not an unreachable service) fails the call after one append."""
    def refused(real: Callable[[Sequence[Prepared]], list[Receipt]],
                batch: Sequence[Prepared]) -> list[Receipt]:
        raise NereusError("refused")

    with wrapped(home, refused) as client:
        with pytest.raises(NereusError, match="refused"):
            client.schedule("m1", "local", deliver_at=AT)
        assert client.sender.appends == 1


def test_a_result_without_an_engine_is_engine_unreachable(client: DelayClient) -> None:
    """No engine answers for the home: exit 4, as the CLI's --wait."""
    receipt = client.schedule("m1", "local", delay="1h")
    with pytest.raises(EngineUnreachable) as raised:
        client.result(receipt, wait=0)
    assert raised.value.exit_code == ExitCode.ENGINE_UNREACHABLE


def test_a_payload_above_the_inline_limit_takes_the_object_store(
        home: Path, client: DelayClient) -> None:
    """2 KiB over a 1 KiB inline limit: reserved, uploaded, committed, then scheduled by
    reference, all on the message's shard, through the same call."""
    receipt = client.schedule("big", "local", deliver_at=AT, payload=b"x" * 2048)
    log = FileShardLog(home / "shardlog" / "default" / "0")
    kinds = [type(decode(r.payload)).__name__ for r in log.read(1, 10)]
    log.close()
    assert kinds == ["PayloadReserve", "PayloadCommit", "Schedule"]
    assert receipt.source_position == 3 and receipt.kind == "SCHEDULE"


def test_many_concurrent_async_schedules_share_appends(home: Path) -> None:
    """200 tasks schedule at once on one AsyncDelayClient: every one gets its receipt,
    in far fewer appends than commands."""
    async def run() -> tuple[list[Receipt], int]:
        async with AsyncDelayClient.from_home(home, batching=Batching(linger_s=0.02)) as client:
            receipts = await asyncio.gather(*(
                client.schedule(f"m{n}", "local", deliver_at=AT) for n in range(200)))
            return receipts, client.sync.sender.appends

    receipts, appends = asyncio.run(asyncio.wait_for(run(), 60))
    assert sorted(r.source_position for r in receipts) == list(range(1, 201))
    assert appends < 50


def test_the_core_client_loads_the_sdk_only_when_asked() -> None:
    """``import nereus.client`` (the core: prepare, validate, errors) loads no adapter,
    thread or broker client; naming ``DelayClient`` loads the SDK."""
    import subprocess
    import sys

    code = ("import sys, nereus.client as c\n"
            "print(sorted(m for m in sys.modules if m.startswith('nereus.adapters')"
            " or m in ('confluent_kafka', 'pulsar')))\n"
            "c.DelayClient\nprint('nereus.adapters.client.delay_client' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.splitlines() == ["[]", "True"]


def test_retry_policy_is_bounded() -> None:
    """Backoffs grow by the multiplier up to the cap, one fewer than the attempts."""
    policy = RetryPolicy(attempts=5, initial_backoff_s=0.1, max_backoff_s=0.3)
    assert list(policy.backoffs()) == [0.1, 0.2, 0.3, 0.3]
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_ordered_keys_share_a_shard(tmp_path: Path) -> None:
    """A keyed message of an ORDERED lane goes to its key's shard, an unordered lane's by id."""
    home = make_home(tmp_path, partitions=4)
    with DelayClient.from_home(home) as client:
        shards = {client.schedule(f"m{n}", "ordered", deliver_at=AT, key="acct-7").shard
                  for n in range(8)}
        by_id = {client.schedule(f"u{n}", "local", deliver_at=AT, key="acct-7").shard
                 for n in range(8)}
    assert len(shards) == 1
    assert shards == {str(client.route.placement("any", "ordered", "acct-7"))}
    assert len(by_id) > 1
