"""A healthy lane's lateness beside N hung lanes, and beside none, in one run.

Usage::

    .venv/bin/python bench/hung_lanes.py [--hung 0 2 4 8] [--messages 400] [--json] [--keep]

Each row is one in-process engine on a fresh home (file Shard Logs, 2 partitions, 40
worker permits, at most 20 per lane) with a healthy file lane and N hung lanes: half of
them file lanes on a FIFO nobody reads (the destination hangs when it is opened), half
READY lanes whose destination takes a publish call and never returns. Each hung lane gets
60 due messages at once; once the READY ones hold the permits they can take, the healthy
lane gets ``--messages`` messages due over the next second, and the bench reports how
late each was published (``published_at - deliver_at``): p50, p99, max, and how many were
published within 30 s.

Two variants per N: **reserved** (the engine as built: each configured lane keeps a
reserved share of the pools, ``engine/scheduler/permits.py``) and **shared** (the same
engine with the reserves taken away, ``permits.configure([])``: the pool as it was shared
before). The engine's publish deadline is left at its 60 s default, longer than a row,
so the hung lanes hold their permits for the whole measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import msgspec

from nereus.evidence_mac import ExpectedMac
from scratch import scratch_dir

HUNG_EACH = 60
WITHIN_S = 30.0


class Figures(msgspec.Struct, frozen=True):
    hung: int
    variant: str  # reserved | shared
    start_s: float  # how long engine.start took
    published: int
    messages: int
    p50_ms: int | None
    p99_ms: int | None
    max_ms: int | None


def _lanes(home: Path, hung: int) -> tuple[str, list[str], list[str]]:
    text = '[lanes.local]\ndestination = "file"\npath = "outbox/local.jsonl"\n'
    fifos, hanging = [], []
    (home / "outbox").mkdir(parents=True)
    for n in range(hung):
        name = f"hung{n}"
        if n % 2:
            os.mkfifo(home / "outbox" / f"{name}.fifo")
            fifos.append(name)
            text += f'[lanes.{name}]\ndestination = "file"\npath = "outbox/{name}.fifo"\n'
        else:
            hanging.append(name)
            text += f'[lanes.{name}]\ndestination = "file"\npath = "outbox/{name}.jsonl"\n'
    return text, fifos, hanging


def run_one(home: Path, hung: int, variant: str, messages: int) -> Figures:
    from nereus.adapters.backends.destination.protocol import (
        Destination,
        PublishRequest,
        PublishResult,
    )
    from nereus.adapters.backends.shardlog.file_log import FileShardLog
    from nereus.client import RouteRef, prepare_schedule
    from nereus.config import parse_config
    from nereus.engine.process.engine_settings import EngineSettings
    from nereus.engine.process.home_engine import Engine
    from nereus.engine.scheduler.permits import PermitLimits
    from nereus.layout import HomeLayout
    from nereus.records import Disposition, Outcome
    from nereus.shard import ShardId
    from nereus.timespec import parse_time_ms

    class Hanging:
        max_record_bytes: int | None = None

        def __init__(self, name: str) -> None:
            self.name = name
            self.release = threading.Event()

        def publish(self, requests: Sequence[PublishRequest],
                    now_ms: Callable[[], int]) -> list[PublishResult]:
            self.release.wait(600)
            return [PublishResult(r.attempt_id, Outcome.PUBLISHED, Disposition.NONE, "late")
                    for r in requests]

        def probe(self) -> str | None:
            return None

        def scan_evidence(self, wanted: Mapping[str, ExpectedMac], since_ms: int,
                          until_ms: int) -> dict[str, str]:
            return {}

        def close(self) -> None:
            self.release.set()

    text, fifos, hanging = _lanes(home, hung)
    text = f'[routes.default]\nlog = "file"\npartitions = 2\n\n{text}'
    (home / "nereus.toml").write_text(text)
    config = parse_config(text, source="bench")
    doubles: dict[str, Destination] = {name: Hanging(name) for name in hanging}
    engine = Engine(home, config, destinations=doubles, settings=EngineSettings(
        permits=PermitLimits(worker=40, lane=20), probe_timeout_s=1.0))
    if variant == "shared":
        engine.permits.configure([])
    began = time.monotonic()
    engine.start()
    start_s = time.monotonic() - began
    route = RouteRef("default", 2, config.ordered_lanes)
    layout = HomeLayout(home)
    logs = {p: FileShardLog(layout.shard_log(ShardId("default", p)), clock_ms=_now)
            for p in range(2)}
    ids = iter(range(10**9))

    def queue(items: list[tuple[str, str, int]]) -> None:
        by: dict[int, list[bytes]] = {}
        for mid, lane, at in items:
            prepared = prepare_schedule(route, command_id=f"c{next(ids)}", delay_message_id=mid,
                                        lane=lane, deliver_at_ms=at)
            by.setdefault(prepared.shard.partition, []).append(prepared.data)
        for partition, data in by.items():
            logs[partition].append(data)

    try:
        base = _now()
        queue([(f"{lane}-{i}", lane, base) for lane in [*hanging, *fifos]
               for i in range(HUNG_EACH)])
        end = time.monotonic() + 10
        while hanging and time.monotonic() < end and sum(
                engine.permits.in_flight(n) for n in hanging) < min(20 * len(hanging), 20):
            time.sleep(0.01)
        first = _now() + 300
        queue([(f"good{i}", "local", first + i * 1_000 // messages) for i in range(messages)])
        outbox = home / "outbox" / "local.jsonl"
        end = time.monotonic() + WITHIN_S
        lines: list[dict[str, object]] = []
        while time.monotonic() < end:
            lines = _lines(outbox)
            if len(lines) >= messages:
                break
            time.sleep(0.05)
        late = sorted(parse_time_ms(str(line["published_at"]))
                      - parse_time_ms(str(line["deliver_at"])) for line in lines)
    finally:
        for double in doubles.values():
            double.close()
        for name in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(home / "outbox" / f"{name}.fifo", os.O_RDONLY | os.O_NONBLOCK))
        for log in logs.values():
            log.close()
        engine.stop()
    return Figures(hung, variant, round(start_s, 2), len(late), messages,
                   _at(late, 0.5), _at(late, 0.99), late[-1] if late else None)


def _now() -> int:
    return time.time_ns() // 1_000_000


def _lines(path: Path) -> list[dict[str, object]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def _at(values: list[int], q: float) -> int | None:
    return values[min(int(len(values) * q), len(values) - 1)] if values else None


def render(figures: list[Figures]) -> str:
    out = ["Nereus Delay: a healthy lane beside N hung lanes (40 worker permits, 20 a lane)",
           f"  {'hung':>4}  {'variant':>8}  {'start':>6}  {'published':>11}  {'p50':>8}  "
           f"{'p99':>8}  {'max':>8}"]
    for f in figures:
        def ms(value: int | None) -> str:
            return "-" if value is None else f"{value} ms"
        out.append(f"  {f.hung:>4}  {f.variant:>8}  {f.start_s:>5.2f}s  "
                   f"{f.published:>5} of {f.messages:<4}  {ms(f.p50_ms):>8}  "
                   f"{ms(f.p99_ms):>8}  {ms(f.max_ms):>8}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hung", type=int, nargs="+", default=[0, 2, 4, 8])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    figures = []
    with scratch_dir("nereus-hung-", None, keep=args.keep) as root:
        for hung in args.hung:
            for variant in ("reserved", "shared"):
                figures.append(run_one(root / f"{variant}-{hung}", hung, variant,
                                       args.messages))
    print(json.dumps([msgspec.to_builtins(f) for f in figures], indent=2) if args.json
          else render(figures))


if __name__ == "__main__":
    main()
