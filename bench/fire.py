"""Fire rate and lateness of the engine through the file destination.

Usage::

    .venv/bin/python bench/fire.py [--burst N] [--rate R --duration S] [--partitions P]
                                   [--only burst|steady] [--json] [--profile] [--keep]

What it does, each scenario in a fresh temp home with the engine running in-process
(``nereus.engine.engine.Engine`` with the daemon's default ``EngineSettings``):

1. **burst**: N SCHEDULE commands, all with the same ``deliver_at`` ``--lead-ms`` ahead,
   are queued to the shards' file logs (``nereus.client.queue``) while the engine applies
   them; the engine must have applied them all before that instant (checked). From
   ``deliver_at`` the bench polls the lane publisher's counter until N are published and
   reports publishes/s, in total and per shard (a shard's lines over the span from
   ``deliver_at`` to its last ``published_at``).
2. **steady**: a feeder *process* (so it does not share the engine's GIL) queues R
   messages a second for S seconds in 10 ms ticks, each ``deliver_at`` = send time +
   ``--steady-lead-ms``; ``--steady-mode prequeue`` instead queues them all up front with
   ``deliver_at`` staggered at 1/R s. Lateness is ``published_at - deliver_at`` of every
   outbox line (ISO-8601 ms, so 1 ms resolution): p50, p99, max, and how many were early.

The engine treats a message as due when Trusted UTC ``earliest`` (wall clock minus
``max_clock_error_ms``, 20 ms by default) reaches ``deliver_at``: that bound is a floor
under every lateness figure, reported with them. ``--profile`` runs every shard-loop and
publisher thread under pyinstrument (a per-thread profiler started inside the thread, set
up here; product code is unchanged) and prints the hottest frames. Everything is removed
afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nereus.adapters.shardlog.file import FileShardLog
from nereus.client import RouteRef, prepare_schedule, queue
from nereus.config import Config, parse_config, render_config
from nereus.engine.engine import Engine, EngineSettings
from nereus.layout import HomeLayout
from nereus.shard import ShardId, partition_for
from nereus.timespec import parse_time_ms

TARGET_RATE_PER_SHARD = 5_000
TARGET_P99_MS = 100
REFERENCES = (
    "Apache Pulsar delayed delivery: tracker tick 1 s by default, may deliver early",
    "Apache RocketMQ delayed messages: 1 s tick (timer wheel), may deliver early",
    "Karafka scheduled messages: dispatcher runs every 15 s",
)
PAYLOAD = b'{"order": 1234567, "action": "remind", "note": "' + b"x" * 48 + b'"}'


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# a home and its engine -------------------------------------------------------------------
def make_home(root: Path, partitions: int) -> tuple[Path, Config]:
    home = Path(tempfile.mkdtemp(prefix="fire-", dir=root))
    text = render_config(route="default", partitions=partitions, log="file",
                         route_id=uuid.uuid4().hex)
    layout = HomeLayout(home)
    layout.config.write_text(text)
    layout.outbox.mkdir()
    return home, parse_config(text, source=str(layout.config))


class Logs:
    """The bench's own file logs, one per shard (flock keeps them apart from the engine's)."""

    def __init__(self, home: Path, partitions: int) -> None:
        self.route = RouteRef("default", partitions)
        self._logs = {ShardId("default", p): FileShardLog(HomeLayout(home).shard_log(
            ShardId("default", p))) for p in range(partitions)}

    def __call__(self, shard: ShardId) -> FileShardLog:
        return self._logs[shard]

    def end_positions(self) -> dict[ShardId, int]:
        return {shard: log.end_position() for shard, log in self._logs.items()}

    def close(self) -> None:
        for log in self._logs.values():
            log.close()


def schedule_many(logs: Logs, deliver_at_ms: Iterator[int], count: int, prefix: str,
                  group: int = 1_000) -> None:
    """Queue ``count`` SCHEDULEs in group appends (one fdatasync per shard per group)."""
    sent = 0
    while sent < count:
        n = min(group, count - sent)
        prepared = [prepare_schedule(
            logs.route, command_id=uuid.uuid4().hex, delay_message_id=f"{prefix}{sent + i}",
            lane="local", deliver_at_ms=next(deliver_at_ms), key=f"k{(sent + i) % 97}",
            headers={"kind": "bench"}, payload=PAYLOAD,
        ) for i in range(n)]
        queue(prepared, logs)
        sent += n


def wait_applied(engine: Engine, ends: dict[ShardId, int], deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if all((engine.shards[s].applied_position or -1) >= e - 1 for s, e in ends.items()):
            return True
        time.sleep(0.005)
    return False


def published(engine: Engine) -> int:
    return sum(p.published for p in engine.publishers.values())


def wait_published(engine: Engine, count: int, deadline_s: float) -> float | None:
    """Monotonic time at which ``count`` publishes were seen (polled every 1 ms)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if published(engine) >= count:
            return time.monotonic()
        time.sleep(0.001)
    return None


def message_states(engine: Engine) -> dict[str, int]:
    """Messages by state over every shard (the lanes' replicated counters)."""
    counts: Counter[str] = Counter()
    for loop in engine.shards.values():
        for lane in loop.lanes().values():
            counts.update(lane.counts)
    return {state: n for state, n in sorted(counts.items()) if n}


def wait_settled(engine: Engine, count: int, deadline_s: float) -> float | None:
    """Monotonic time at which ``count`` messages were PUBLISHED in the shards' state."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if message_states(engine).get("PUBLISHED", 0) >= count:
            return time.monotonic()
        time.sleep(0.002)
    return None


def outbox_lines(home: Path) -> list[dict[str, Any]]:
    path = HomeLayout(home).outbox / "local.jsonl"
    return [json.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@contextmanager
def running(home: Path, config: Config) -> Iterator[Engine]:
    engine = Engine(home, config, settings=EngineSettings.from_config(config.engine))
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()


def percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        return 0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


# scenario 1: a burst all due at once -----------------------------------------------------
def burst(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    home, config = make_home(root, args.partitions)
    logs = Logs(home, args.partitions)
    try:
        with running(home, config) as engine:
            queued_at = time.monotonic()
            due_ms = now_ms() + args.lead_ms
            schedule_many(logs, itertools.repeat(due_ms), args.burst, "b")
            queue_s = time.monotonic() - queued_at
            applied_in_time = wait_applied(engine, logs.end_positions(), args.lead_ms / 1000)
            applied_ms = now_ms()
            if now_ms() < due_ms:
                time.sleep((due_ms - now_ms()) / 1000)
            due_mono = time.monotonic() - max(now_ms() - due_ms, 0) / 1000
            cpu_before = time.process_time()
            done = wait_published(engine, args.burst, args.deadline)
            cpu_s = time.process_time() - cpu_before
            settled = wait_settled(engine, args.burst, args.deadline)
            states = message_states(engine)
        lines = outbox_lines(home)
    finally:
        logs.close()
    if done is None:
        raise SystemExit(f"burst: only {len(lines)} of {args.burst} published within "
                         f"{args.deadline} s")
    total_s = done - due_mono
    per_shard: dict[str, dict[str, Any]] = {}
    by_shard: dict[str, list[int]] = {}
    for line in lines:
        shard = f"default/{partition_for(line['delay_message_id'], args.partitions)}"
        by_shard.setdefault(shard, []).append(parse_time_ms(line["published_at"]))
    for shard, stamps in sorted(by_shard.items()):
        span_ms = max(max(stamps) - due_ms, 1)
        per_shard[shard] = {"published": len(stamps), "span_ms": span_ms,
                            "rate_per_s": round(len(stamps) / span_ms * 1000)}
    first_ms = min(min(s) for s in by_shard.values()) - due_ms
    worst = min(s["rate_per_s"] for s in per_shard.values())
    return {
        "messages": args.burst,
        "partitions": args.partitions,
        "outbox_lines": len(lines),
        "duplicates": len(lines) - len({line["delay_message_id"] for line in lines}),
        "states": states,
        "queue_s": round(queue_s, 3),
        "applied_before_due": applied_in_time,
        "applied_ms_before_due": due_ms - applied_ms,
        "first_publish_after_due_ms": first_ms,
        "all_published_after_due_s": round(total_s, 3),
        "all_recorded_after_due_s": None if settled is None else round(settled - due_mono, 3),
        "rate_total_per_s": round(args.burst / total_s),
        "cpu_per_wall": round(cpu_s / total_s, 2),
        "per_shard": per_shard,
        "rate_per_shard_min": worst,
        "target_per_shard": TARGET_RATE_PER_SHARD,
        "met": worst >= TARGET_RATE_PER_SHARD,
    }


# scenario 2: a steady rate ---------------------------------------------------------------
def feeder(home: str, partitions: int, rate: int, duration_s: float, lead_ms: int,
           start_at_ms: int, prefix: str) -> None:
    """(child process) Queue ``rate`` messages/s for ``duration_s`` in 10 ms ticks."""
    logs = Logs(Path(home), partitions)
    total = int(rate * duration_s)
    sent = 0
    try:
        while now_ms() < start_at_ms:
            time.sleep(0.001)
        begin = time.monotonic()
        while sent < total:
            due = min(total, int((time.monotonic() - begin) * rate) + 1)
            if due > sent:
                n = due - sent
                send_ms = now_ms()
                schedule_many(logs, itertools.repeat(send_ms + lead_ms), n,
                              f"{prefix}{sent}-", group=n)
                sent = due
            time.sleep(0.01)
    finally:
        logs.close()


def steady(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    home, config = make_home(root, args.partitions)
    total = int(args.rate * args.duration)
    logs = Logs(home, args.partitions)
    try:
        with running(home, config) as engine:
            assert engine.clock is not None
            error_ms = engine.clock.max_error_ms
            wall_before, cpu_before = time.monotonic(), time.process_time()
            if args.steady_mode == "prequeue":
                first_ms = now_ms() + args.lead_ms
                step = 1000 / args.rate
                stamps = (first_ms + int(i * step) for i in range(total))
                schedule_many(logs, stamps, total, "s")
            else:
                context = multiprocessing.get_context("spawn")
                child = context.Process(target=feeder, args=(
                    str(home), args.partitions, args.rate, args.duration, args.steady_lead_ms,
                    now_ms() + 300, "f"))
                child.start()
                child.join(args.duration + args.deadline)
                if child.exitcode != 0:
                    raise SystemExit(f"steady: the feeder exited with {child.exitcode}")
            done = wait_published(engine, total, args.deadline + args.duration)
            cpu_per_wall = (time.process_time() - cpu_before) / (time.monotonic() - wall_before)
            wait_settled(engine, total, args.deadline)
            states = message_states(engine)
        lines = outbox_lines(home)
    finally:
        logs.close()
    if done is None:
        raise SystemExit(f"steady: only {len(lines)} of {total} published in time")
    lateness = sorted(parse_time_ms(line["published_at"]) - parse_time_ms(line["deliver_at"])
                      for line in lines)
    p99 = percentile(lateness, 0.99)
    return {
        "mode": args.steady_mode,
        "rate_per_s": args.rate,
        "duration_s": args.duration,
        "messages": total,
        "partitions": args.partitions,
        "outbox_lines": len(lines),
        "duplicates": len(lines) - len({line["delay_message_id"] for line in lines}),
        "states": states,
        "lead_ms": args.steady_lead_ms if args.steady_mode == "feeder" else None,
        "clock_error_floor_ms": error_ms,
        "lateness_ms": {"p50": percentile(lateness, 0.50), "p90": percentile(lateness, 0.90),
                        "p99": p99, "max": lateness[-1] if lateness else 0,
                        "mean": round(statistics.fmean(lateness), 1) if lateness else 0.0},
        "early": sum(1 for value in lateness if value < 0),
        "engine_cpu_per_wall": round(cpu_per_wall, 2),
        "target_p99_ms": TARGET_P99_MS,
        "met": p99 < TARGET_P99_MS,
    }


# profiling (bench-only instrumentation) --------------------------------------------------
WORKER_BODY = "run"  # the method the engine's supervisor runs in each worker thread


class ThreadProfiles:
    """pyinstrument inside every shard-loop and publisher thread, merged afterwards."""

    def __init__(self) -> None:
        self.sessions: list[Any] = []
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        from nereus.engine.publisher import LanePublisher
        from nereus.engine.shard_loop import ShardLoop

        workers: tuple[type[ShardLoop | LanePublisher], ...] = (ShardLoop, LanePublisher)
        for cls in workers:
            original: Callable[[Any], None] = cls.run

            def profiled(self_: object, _original: Callable[[Any], None] = original) -> None:
                from pyinstrument import Profiler

                profiler = Profiler(interval=0.001)
                profiler.start()
                try:
                    _original(self_)
                finally:
                    session = profiler.stop()
                    with self._lock:
                        self.sessions.append((threading.current_thread().name, session))

            setattr(cls, WORKER_BODY, profiled)
            self._undo.append(functools.partial(setattr, cls, WORKER_BODY, original))

    def uninstall(self) -> None:
        for undo in self._undo:
            undo()

    def report(self, top: int) -> list[dict[str, Any]]:
        """Per profiled thread: time waiting vs busy, the hottest functions by self time,
        and the inclusive time of the engine's phases."""
        out = []
        for name, session in self.sessions:
            own: Counter[str] = Counter()
            inclusive: Counter[str] = Counter()
            root = session.root_frame()
            stack = [root] if root is not None else []
            while stack:
                frame = stack.pop()
                stack.extend(frame.children)
                if frame.file_path is None and frame.function == "[self]":
                    continue
                where = f"{frame.function} ({Path(frame.file_path or '?').name}:{frame.line_no})"
                own[where] += frame.total_self_time
                if frame.function in PHASES:
                    inclusive[f"{frame.function} ({Path(frame.file_path or '?').name})"] += \
                        frame.time
            total = root.time if root is not None else 0.0
            waiting = sum(v for k, v in own.items() if k.startswith(WAITS))
            out.append({
                "thread": name, "seconds": round(total, 3), "waiting_s": round(waiting, 3),
                "busy_s": round(total - waiting, 3),
                "phases": {k: round(v, 3) for k, v in inclusive.most_common()},
                "top_self": [{"where": k, "self_s": round(v, 3)}
                             for k, v in own.most_common(top + 8)
                             if not k.startswith(WAITS)][:top],
            })
        return out


WAITS = ("lock.acquire", "sleep", "wait ", "select")
PHASES = frozenset({
    "_apply", "_schedule", "_flush_outcomes", "_expire_claims", "_on_applied", "round",
    "step", "apply", "write", "append", "read", "publish", "render_line", "lanes", "_paused",
    "_new_id", "uuid4", "_gate_closed", "_release", "submit",
})


# report ----------------------------------------------------------------------------------
def render(report: dict[str, Any]) -> str:
    out = [f"Nereus Delay fire bench: in-process engine, file destination, "
           f"{report['partitions']} shard(s), {report['cpus']} CPU(s)"]
    if "burst" in report:
        b = report["burst"]
        out.append(f"burst   {b['messages']:,} messages due at once "
                   f"(queued in {b['queue_s']} s, applied "
                   f"{'before' if b['applied_before_due'] else 'NOT before'} due)")
        out.append(f"        first publish {b['first_publish_after_due_ms']} ms after due; all "
                   f"{b['outbox_lines']:,} in {b['all_published_after_due_s']} s = "
                   f"{b['rate_total_per_s']:,}/s total; every outcome applied after "
                   f"{b['all_recorded_after_due_s']} s; process CPU {b['cpu_per_wall']} s/s")
        for shard, s in b["per_shard"].items():
            out.append(f"        {shard}: {s['published']:,} in {s['span_ms']} ms = "
                       f"{s['rate_per_s']:,}/s")
        out.append(f"        target >= {b['target_per_shard']:,} publishes/s per shard: "
                   f"{'MET' if b['met'] else 'MISSED'}  (duplicates {b['duplicates']}, states "
                   f"{b['states']})")
    if "steady" in report:
        s = report["steady"]
        how = (f"feeder process, deliver_at = send + {s['lead_ms']} ms"
               if s["mode"] == "feeder" else "pre-queued, deliver_at staggered")
        lat = s["lateness_ms"]
        out.append(f"steady  {s['rate_per_s']:,}/s for {s['duration_s']} s "
                   f"({s['messages']:,} messages; {how})")
        out.append(f"        lateness p50 {lat['p50']} ms  p90 {lat['p90']} ms  p99 {lat['p99']} "
                   f"ms  max {lat['max']} ms  mean {lat['mean']} ms; early {s['early']}; "
                   f"floor {s['clock_error_floor_ms']} ms (Trusted UTC error bound); engine "
                   f"process CPU {s['engine_cpu_per_wall']} s/s")
        out.append(f"        target p99 < {s['target_p99_ms']} ms: "
                   f"{'MET' if s['met'] else 'MISSED'}  (duplicates {s['duplicates']}, states "
                   f"{s['states']})")
    out.append("reference (not measured):")
    out.extend(f"        {line}" for line in REFERENCES)
    for profile in report.get("profile", []):
        out.append(f"profile {profile['thread']}: {profile['seconds']} s sampled, "
                   f"{profile['busy_s']} s busy, {profile['waiting_s']} s waiting")
        out.append("        phases (inclusive): " + ", ".join(
            f"{k} {v} s" for k, v in profile["phases"].items()))
        out.extend(f"        {hot['self_s']:>7.3f} s  {hot['where']}"
                   for hot in profile["top_self"])
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=20_000, help="messages due at once")
    parser.add_argument("--rate", type=int, default=2_000, help="steady messages per second")
    parser.add_argument("--duration", type=float, default=10.0, help="steady seconds")
    parser.add_argument("--partitions", type=int, default=1, help="shards of the route")
    parser.add_argument("--lead-ms", type=int, default=4_000,
                        help="burst: deliver_at this far after queueing starts")
    parser.add_argument("--steady-lead-ms", type=int, default=200,
                        help="steady feeder: deliver_at = send time + this")
    parser.add_argument("--steady-mode", choices=("feeder", "prequeue"), default="feeder")
    parser.add_argument("--only", choices=("burst", "steady"), default=None)
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds per wait")
    parser.add_argument("--dir", type=Path, default=None, help="where the temp homes go")
    parser.add_argument("--keep", action="store_true", help="keep the temp homes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--profile", action="store_true",
                        help="profile the engine threads with pyinstrument")
    parser.add_argument("--profile-top", type=int, default=12)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nereus-fire-", dir=args.dir))
    profiles = ThreadProfiles() if args.profile else None
    if profiles is not None:
        profiles.install()
    report: dict[str, Any] = {"partitions": args.partitions, "cpus": os.cpu_count()}
    try:
        if args.only in (None, "burst"):
            report["burst"] = burst(root, args)
        if args.only in (None, "steady"):
            report["steady"] = steady(root, args)
    finally:
        if profiles is not None:
            profiles.uninstall()
            report["profile"] = profiles.report(args.profile_top)
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    report["references"] = list(REFERENCES)
    report["command"] = " ".join([Path(sys.executable).name, *sys.argv])
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
