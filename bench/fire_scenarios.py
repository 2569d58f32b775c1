"""The two scenarios of ``bench/fire.py``: a burst all due at once, and a steady rate.

Each runs in a fresh home whose route is on the file log and whose lane ``local`` writes
to the outbox file, with the engine in this process. What was published is read back
from the outbox (``published_at`` is ISO-8601 in ms, so lateness has 1 ms resolution).
The home is at the feature level asked for (``level``): at 1 every admission and outcome
is a Shard Log record of its own, at 2 a turn's go as one PUBLISH_BATCH.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec

from fire_engines import watched
from fire_raw import RawBaseline, raw_baseline
from inprocess_engine import (
    Due,
    ShardLogs,
    home_config,
    new_home,
    now_ms,
    percentile,
    queue_due,
    wait_for,
)
from nereus.adapters.home.feature_level import write_home_level
from nereus.cluster.records import FeatureLevel
from nereus.config import Config
from nereus.config_template import render_config
from nereus.layout import HomeLayout
from nereus.shard import partition_for
from nereus.timespec import parse_time_ms

TARGET_RATE_PER_SHARD = 5_000
TARGET_P99_MS = 100
HEADERS = {"kind": "bench"}


def make_home(root: Path, partitions: int, level: int = 1) -> tuple[Path, Config]:
    text = render_config(route="default", partitions=partitions, log="file",
                         route_id=uuid.uuid4().hex)
    home, config = new_home(root, f"fire-l{level}-", text)
    HomeLayout(home).outbox.mkdir()
    if level > 1:  # as `nereus upgrade finalize` leaves it
        write_home_level(home, FeatureLevel(level=level, raised_by="bench", reason="fire"))
    return home, config


def outbox_lines(home: Path) -> list[dict[str, Any]]:
    path = HomeLayout(home).outbox / "local.jsonl"
    return [json.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def duplicates(lines: list[dict[str, Any]]) -> int:
    return len(lines) - len({line["delay_message_id"] for line in lines})


# scenario 1: a burst all due at once -----------------------------------------------------
class BurstShard(msgspec.Struct, frozen=True):
    published: int
    span_ms: int
    rate_per_s: int


class BurstFigures(msgspec.Struct, frozen=True):
    feature_level: int
    messages: int
    partitions: int
    outbox_lines: int
    duplicates: int
    states: dict[str, int]
    queue_s: float
    applied_before_due: bool
    applied_ms_before_due: int
    first_publish_after_due_ms: int
    all_published_after_due_s: float
    all_recorded_after_due_s: float | None
    rate_total_per_s: int
    cpu_per_wall: float
    engine_cpu_s: float  # from due until every outcome was applied
    cpu_us_per_publish: float  # engine_cpu_s per published message
    raw: RawBaseline  # the same lines in the same batches, written without the engine
    raw_ratio: float  # rate_total_per_s / raw.rate_per_s
    per_shard: dict[str, BurstShard]
    rate_per_shard_min: int
    target_per_shard: int
    met: bool


def _stamps_by_shard(lines: list[dict[str, Any]], partitions: int) -> dict[str, list[int]]:
    """``published_at`` of each outbox line, by the shard its message is on."""
    by_shard: dict[str, list[int]] = {}
    for line in lines:
        shard = f"default/{partition_for(line['delay_message_id'], partitions)}"
        by_shard.setdefault(shard, []).append(parse_time_ms(line["published_at"]))
    return by_shard


def burst(root: Path, args: argparse.Namespace, level: int) -> BurstFigures:
    home, config = make_home(root, args.partitions, level)
    with watched(home, config, args.workers) as run:
        probe = run.probe
        queued_at = time.monotonic()
        due_ms = now_ms() + args.lead_ms
        queue_due(run.logs, (Due(f"b{i}", f"k{i % 97}", due_ms) for i in range(args.burst)),
                  lane="local", headers=HEADERS)
        queue_s = time.monotonic() - queued_at
        ends = run.logs.end_positions()
        applied_in_time = wait_for(lambda: probe.applied_through(ends),
                                   args.lead_ms / 1000) is not None
        applied_ms = now_ms()
        if now_ms() < due_ms:
            time.sleep((due_ms - now_ms()) / 1000)
        due_mono = time.monotonic() - max(now_ms() - due_ms, 0) / 1000
        cpu_before = probe.cpu_s()
        done = wait_for(lambda: probe.published() >= args.burst, args.deadline, 0.001)
        cpu_s = probe.cpu_s() - cpu_before
        settled = wait_for(lambda: probe.all_published(args.burst), args.deadline, 0.02)
        engine_cpu_s = probe.cpu_s() - cpu_before
        states = probe.states()
    lines = outbox_lines(home)
    raw = raw_baseline(HomeLayout(home).outbox / "local.jsonl", home / "raw.jsonl")
    if done is None:
        raise SystemExit(f"burst: only {len(lines)} of {args.burst} published within "
                         f"{args.deadline} s")
    total_s = done - due_mono
    by_shard = _stamps_by_shard(lines, args.partitions)
    per_shard = {}
    for shard, stamps in sorted(by_shard.items()):
        span_ms = max(max(stamps) - due_ms, 1)
        per_shard[shard] = BurstShard(published=len(stamps), span_ms=span_ms,
                                      rate_per_s=round(len(stamps) / span_ms * 1000))
    worst = min(s.rate_per_s for s in per_shard.values())
    return BurstFigures(
        feature_level=level,
        messages=args.burst,
        partitions=args.partitions,
        outbox_lines=len(lines),
        duplicates=duplicates(lines),
        states=states,
        queue_s=round(queue_s, 3),
        applied_before_due=applied_in_time,
        applied_ms_before_due=due_ms - applied_ms,
        first_publish_after_due_ms=min(min(s) for s in by_shard.values()) - due_ms,
        all_published_after_due_s=round(total_s, 3),
        all_recorded_after_due_s=None if settled is None else round(settled - due_mono, 3),
        rate_total_per_s=round(args.burst / total_s),
        cpu_per_wall=round(cpu_s / total_s, 2),
        engine_cpu_s=round(engine_cpu_s, 3),
        cpu_us_per_publish=round(engine_cpu_s / max(len(lines), 1) * 1e6, 1),
        raw=raw,
        raw_ratio=round(args.burst / total_s / raw.rate_per_s, 3),
        per_shard=per_shard,
        rate_per_shard_min=worst,
        target_per_shard=TARGET_RATE_PER_SHARD,
        met=worst >= TARGET_RATE_PER_SHARD,
    )


# scenario 2: a steady rate ---------------------------------------------------------------
class SteadyLateness(msgspec.Struct, frozen=True):
    p50: int
    p90: int
    p99: int
    max: int
    mean: float


class SteadyFigures(msgspec.Struct, frozen=True):
    feature_level: int
    mode: str
    rate_per_s: int
    duration_s: float
    messages: int
    partitions: int
    outbox_lines: int
    duplicates: int
    states: dict[str, int]
    lead_ms: int | None
    clock_error_floor_ms: int
    lateness_ms: SteadyLateness
    early: int
    engine_cpu_per_wall: float
    target_p99_ms: int
    met: bool


def feeder(home: str, rate: int, duration_s: float, lead_ms: int, start_at_ms: int,
           prefix: str) -> None:
    """(child process) Queue ``rate`` messages/s for ``duration_s`` in 10 ms ticks."""
    logs = ShardLogs(Path(home), home_config(Path(home)))
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
                deliver_at_ms = now_ms() + lead_ms
                queue_due(logs, (Due(f"{prefix}{sent}-{i}", f"k{i % 97}", deliver_at_ms)
                                 for i in range(n)), lane="local", headers=HEADERS, group=n)
                sent = due
            time.sleep(0.01)
    finally:
        logs.close()


def _feed(home: Path, logs: ShardLogs, args: argparse.Namespace, total: int) -> None:
    """Queue the steady messages: all up front (prequeue), or from a feeder process."""
    if args.steady_mode == "prequeue":
        first_ms = now_ms() + args.lead_ms
        step = 1000 / args.rate
        queue_due(logs, (Due(f"s{i}", f"k{i % 97}", first_ms + int(i * step))
                         for i in range(total)), lane="local", headers=HEADERS)
        return
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=feeder, args=(
        str(home), args.rate, args.duration, args.steady_lead_ms, now_ms() + 300, "f"))
    child.start()
    child.join(args.duration + args.deadline)
    if child.exitcode != 0:
        raise SystemExit(f"steady: the feeder exited with {child.exitcode}")


def steady(root: Path, args: argparse.Namespace, level: int) -> SteadyFigures:
    home, config = make_home(root, args.partitions, level)
    total = int(args.rate * args.duration)
    with watched(home, config, args.workers) as run:
        probe = run.probe
        error_ms = probe.max_error_ms
        wall_before, cpu_before = time.monotonic(), probe.cpu_s()
        _feed(home, run.logs, args, total)
        done = wait_for(lambda: probe.published() >= total, args.deadline + args.duration,
                        0.001)
        cpu_per_wall = (probe.cpu_s() - cpu_before) / (time.monotonic() - wall_before)
        wait_for(lambda: probe.all_published(total), args.deadline, 0.02)
        states = probe.states()
    lines = outbox_lines(home)
    if done is None:
        raise SystemExit(f"steady: only {len(lines)} of {total} published in time")
    lateness = sorted(parse_time_ms(line["published_at"]) - parse_time_ms(line["deliver_at"])
                      for line in lines)
    p99 = percentile(lateness, 0.99)
    return SteadyFigures(
        feature_level=level,
        mode=args.steady_mode,
        rate_per_s=args.rate,
        duration_s=args.duration,
        messages=total,
        partitions=args.partitions,
        outbox_lines=len(lines),
        duplicates=duplicates(lines),
        states=states,
        lead_ms=args.steady_lead_ms if args.steady_mode == "feeder" else None,
        clock_error_floor_ms=error_ms,
        lateness_ms=SteadyLateness(
            p50=percentile(lateness, 0.50), p90=percentile(lateness, 0.90), p99=p99,
            max=lateness[-1] if lateness else 0,
            mean=round(statistics.fmean(lateness), 1) if lateness else 0.0),
        early=sum(1 for value in lateness if value < 0),
        engine_cpu_per_wall=round(cpu_per_wall, 2),
        target_p99_ms=TARGET_P99_MS,
        met=p99 < TARGET_P99_MS,
    )
