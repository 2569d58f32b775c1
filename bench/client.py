"""The producer SDK's cost on Kafka: schedules/s from one client process, with batching,
beside confluent-kafka's own produce rate for the same bytes, in the same run.

Throughput (no engine, so both sides have the machine to themselves): M ``schedule()``
calls (checks, prepare, batching, append, receipt) through one ``AsyncDelayClient``
(``--window`` in flight, the linger of ``Batching``), the rate from the first call to the
last QUEUED receipt and each call's latency to its receipt; then the baseline: one
confluent-kafka ``Producer`` configured as the client's own
(idempotent, ``acks=all``, linger 5 ms) producing the very bytes of those commands to the
same partitions of another topic, one ``flush`` at the end. The two alternate for
``--rounds`` rounds; the median of each is reported, and their ratio (the client's rate over
the raw producer's: the SDK's overhead, 1.0 = none).

Latency to APPLIED (an engine running on another home, a separate process, as in
production): ``--samples`` schedules from ``--concurrency`` threads, each waiting for the
QUEUED receipt, then for the APPLIED result (``result()``); p50 and p99 of both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from nereus.adapters.client.appends import Via
from nereus.client import AsyncDelayClient, Batching, DelayClient, Prepared
from nereus.errors import NereusError

BOOTSTRAP = "127.0.0.1:9092"  # the default of --bootstrap
REPO = Path(__file__).resolve().parents[1]


class Side(msgspec.Struct, frozen=True):
    rate_per_s: int  # the median round's
    rounds_per_s: list[int]


class Latency(msgspec.Struct, frozen=True):
    samples: int
    p50_ms: float
    p99_ms: float
    errors: int = 0  # calls that raised (a broker restarted under the run): not sampled


class ClientReport(msgspec.Struct, frozen=True):
    messages: int
    partitions: int
    payload_bytes: int
    record_bytes: int
    window: int
    linger_ms: float
    client: Side
    raw_producer: Side
    ratio: float  # client / raw producer (median rounds)
    appends_per_round: int  # the client's appends in its last round
    queued_under_load: Latency  # call -> QUEUED receipt, during the throughput rounds
    # call -> QUEUED and -> APPLIED at --concurrency, the engine running: through it
    # (via="auto", the default in a home with its engine) and straight to Kafka (via="log")
    queued_via_engine: Latency
    applied_via_engine: Latency
    queued_via_log: Latency
    applied_via_log: Latency


def route_toml(bootstrap: str, topic: str, partitions: int) -> str:
    return (f'[routes.default]\nlog = "kafka"\nbootstrap = "{bootstrap}"\ntopic = "{topic}"\n'
            f"partitions = {partitions}\n\n[lanes.out]\ndestination = \"kafka\"\n"
            f'bootstrap = "{bootstrap}"\ntopic = "{topic}.out"\n')


def new_home(root: Path, name: str, bootstrap: str, partitions: int) -> Path:
    home = root / name
    home.mkdir()
    (home / "nereus.toml").write_text(route_toml(
        bootstrap, f"bench.client-{uuid.uuid4().hex[:8]}", partitions))
    return home


def percentiles(seconds: list[float], errors: int = 0) -> Latency:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return Latency(samples=len(ordered), p50_ms=at(0.5), p99_ms=at(0.99), errors=errors)


async def client_round(home: Path, messages: int, window: int, payload: bytes,
                       batching: Batching, tag: str
                       ) -> tuple[float, list[float], list[Prepared], int]:
    """(seconds, call->receipt latencies, the commands as prepared, appends): each of
    ``messages`` full ``schedule()`` calls (checks, prepare, batching, append, receipt)."""
    latencies: list[float] = []
    at = datetime(2100, 1, 1, tzinfo=UTC)  # fixed: the raw side prepares the same bytes
    async with AsyncDelayClient.from_home(home, batching=batching, via="log") as client:
        route = client.sync.route
        warm_ids = {route.shard_for(f"{tag}-warm-{n}"): f"{tag}-warm-{n}" for n in range(64)}
        for warm_id in warm_ids.values():  # every partition connected before the clock
            await client.schedule(warm_id, "out", deliver_at=at, payload=payload)
        warm = client.sync.sender.appends
        todo = iter(range(messages))

        async def worker() -> None:  # ``window`` of these: that many schedules in flight
            for n in todo:
                began = time.perf_counter()
                await client.schedule(f"{tag}-{n}", "out", deliver_at=at, payload=payload)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(window)))
        seconds = time.perf_counter() - began
        prepared = [client.sync.prepare_schedule(f"{tag}-{n}", "out", deliver_at=at,
                                                 payload=payload) for n in range(messages)]
        return seconds, latencies, prepared, client.sync.sender.appends - warm


def raw_round(bootstrap: str, topic: str, prepared: list[Prepared]) -> float:
    """confluent-kafka alone: the same bytes to the same partitions, one flush."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for partition in {command.shard.partition for command in prepared}:
        producer.produce(topic, b"warm", partition=partition)  # connected before the clock
    producer.flush(60)
    began = time.perf_counter()
    for command in prepared:
        while True:
            try:
                producer.produce(topic, command.data, partition=command.shard.partition,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    seconds = time.perf_counter() - began
    assert not failed, failed[:3]
    return seconds


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(60)


def latency_phase(home: Path, samples: int, concurrency: int, payload: bytes
                  ) -> dict[str, tuple[Latency, Latency]]:
    """For each way in (through the engine, straight to the log): schedules from
    ``concurrency`` threads, each waiting for QUEUED then APPLIED."""
    nereus = [str(Path(sys.executable).parent / "nereus"), "--home", str(home)]
    subprocess.run([*nereus, "engine", "start", "--timeout", "60"], check=True,
                   capture_output=True, cwd=REPO)
    try:
        ways: tuple[Via, ...] = ("auto", "log")
        return {via: latencies(home, via, samples, concurrency, payload) for via in ways}
    finally:
        subprocess.run([*nereus, "engine", "stop"], check=False, capture_output=True, cwd=REPO)


def latencies(home: Path, via: Via, samples: int, concurrency: int, payload: bytes
              ) -> tuple[Latency, Latency]:
    """(call -> QUEUED, call -> APPLIED) of ``samples`` schedules sent ``via``."""
    queued: list[float] = []
    applied: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    run = uuid.uuid4().hex[:8]  # ids of their own, whatever the home already holds
    with DelayClient.from_home(home, via=via) as client:
        client.result(client.schedule(f"warm-{via}-{uuid.uuid4().hex}", "out", delay="1h"),
                      wait=60)

        def worker(index: int) -> None:
            for n in range(index, samples, concurrency):
                began = time.perf_counter()
                try:
                    receipt = client.schedule(f"lat-{via}-{run}-{n}", "out", delay="1h",
                                              payload=payload)
                    got = time.perf_counter()
                    client.result(receipt, wait=60)
                except NereusError:
                    errors.append(n)
                    continue
                with lock:
                    queued.append(got - began)
                    applied.append(time.perf_counter() - began)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return percentiles(queued, len(errors)), percentiles(applied, len(errors))


def run(args: argparse.Namespace) -> ClientReport:
    payload = b"p" * args.payload_bytes
    batching = Batching(linger_s=args.linger_ms / 1000)
    client_s: list[float] = []
    raw_s: list[float] = []
    under_load: list[float] = []
    appends = 0
    record_bytes = 0
    with tempfile.TemporaryDirectory(prefix="bench-client-") as scratch:
        root = Path(scratch)
        for round_no in range(args.rounds):
            home = new_home(root, f"throughput-{round_no}", args.bootstrap, args.partitions)
            seconds, latencies, prepared, appends = asyncio.run(client_round(
                home, args.messages, args.window, payload, batching, f"r{round_no}"))
            client_s.append(seconds)
            under_load += latencies
            record_bytes = len(prepared[0].data)
            raw_topic = f"bench.client-raw-{uuid.uuid4().hex[:8]}"
            create_topic(args.bootstrap, raw_topic, args.partitions)
            raw_s.append(raw_round(args.bootstrap, raw_topic, prepared))
        phase = latency_phase(new_home(root, "latency", args.bootstrap, args.partitions),
                              args.samples, args.concurrency, payload)
    rates = [int(args.messages / s) for s in client_s]
    raw_rates = [int(args.messages / s) for s in raw_s]
    client = Side(rate_per_s=int(statistics.median(rates)), rounds_per_s=rates)
    raw = Side(rate_per_s=int(statistics.median(raw_rates)), rounds_per_s=raw_rates)
    return ClientReport(
        messages=args.messages, partitions=args.partitions, payload_bytes=args.payload_bytes,
        record_bytes=record_bytes, window=args.window, linger_ms=args.linger_ms,
        client=client, raw_producer=raw, ratio=round(client.rate_per_s / raw.rate_per_s, 3),
        appends_per_round=appends, queued_under_load=percentiles(under_load),
        queued_via_engine=phase["auto"][0], applied_via_engine=phase["auto"][1],
        queued_via_log=phase["log"][0], applied_via_log=phase["log"][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--window", type=int, default=5_000, help="schedules in flight")
    parser.add_argument("--linger-ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=400, help="for the APPLIED latency")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--bootstrap", default=BOOTSTRAP, help="Kafka (default: %(default)s)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args)
    if args.json:
        print(msgspec.json.encode(report).decode())
        return
    print(f"client      {report.client.rate_per_s:>8} schedules/s  (rounds "
          f"{report.client.rounds_per_s}, {report.appends_per_round} appends a round)")
    print(f"raw Kafka   {report.raw_producer.rate_per_s:>8} records/s    (rounds "
          f"{report.raw_producer.rounds_per_s})")
    print(f"ratio       {report.ratio}")
    for name, lat in (("QUEUED under load", report.queued_under_load),
                      ("QUEUED via engine", report.queued_via_engine),
                      ("APPLIED via engine", report.applied_via_engine),
                      ("QUEUED via log", report.queued_via_log),
                      ("APPLIED via log", report.applied_via_log)):
        print(f"{name:<18} p50 {lat.p50_ms} ms  p99 {lat.p99_ms} ms  ({lat.samples} samples, "
              f"{lat.errors} errors)")


if __name__ == "__main__":
    main()
