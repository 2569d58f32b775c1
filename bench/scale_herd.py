"""``bench/scale.py``'s herd: N messages due in the same second on lane ``a`` while lane
``b`` carries a steady rate, on a route of 4 shards (the daemon, default workers).

First a solo burst of N/10 on ``a`` alone measures the engine's full publish rate in this
run. Then the herd is queued, due once it is applied; from a few seconds before that
second, a feeder process queues ``rate`` messages a second on ``b``, each due
``B_LEAD_MS`` after it is queued, until ``a`` has drained. Reported: ``a``'s drain rate
against the solo rate, ``b``'s lateness (published_at minus deliver_at, from the outbox
files, 1 ms resolution) over the messages due while ``a`` drained, messages published
early on either lane (there must be none), and from the engine's histograms of lane ``b``
how late its admissions were decided and how long from an admission applied to its
outcome applied (the publish lies between).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import multiprocessing.synchronize
import os
import time
from pathlib import Path

import msgspec

from inprocess_engine import Due, ShardLogs, home_config, now_ms, percentile, queue_due
from nereus.layout import HomeLayout
from nereus.timespec import parse_time_ms
from scale_engine import Daemon, config_of, make_home, open_logs, wait_until

PARTITIONS = 4
B_LEAD_MS = 1_000
TARGET_B_P99_MS = 100
# queue and apply cost per herd message, for the due second's lead: generous, so the herd is
# applied (pending on the timeline) before it is due, as a herd scheduled in advance is; a
# herd still being applied when due measures apply competing with the drain instead
QUEUE_US = 200


class Stage(msgspec.Struct, frozen=True):
    """One of the engine's latency histograms for a lane: its mean and the upper bound of
    the bucket its p99 falls in (None: no observation, or beyond the last bound)."""

    count: int
    mean_ms: float | None
    p99_under_ms: float | None


class Stages(msgspec.Struct, frozen=True):
    decided_after_action_at: Stage
    admission_to_outcome: Stage


class HerdFigures(msgspec.Struct, frozen=True):
    herd: int
    b_rate_per_s: int
    solo_messages: int
    solo_rate_per_s: int
    a_drain_s: float
    a_rate_per_s: int
    a_vs_solo: float
    applied_before_due: bool
    b_during_drain: int
    b_lateness_p50_ms: int
    b_lateness_p99_ms: int
    b_lateness_max_ms: int
    # b's p99 lateness in each tenth of the drain (by deliver_at): a lateness that grows
    # is a backlog; one that is the same from the start is a delay in the pipeline or
    # the clock
    b_p99_by_tenth_ms: list[int]
    # the engine's Trusted UTC held behind the wall clock when the drain ended (a step
    # forwards while it ran makes every message that much late)
    held_back_ms: int
    # where b's time went, from the engine's own histograms of lane b over the run: how
    # late its admissions were decided after their actionAt (nereus_due_lag_seconds), and
    # from an admission applied to its outcome applied, the publish between them
    # (nereus_admission_outcome_latency_seconds): means, and the bucket bound p99 is under
    b_stages: Stages
    # Trusted UTC's error bound ([engine] max_clock_error_ms): a message is due once the
    # wall clock less it reaches its actionAt, so every lateness above includes it
    clock_error_ms: int
    early_a: int
    early_b: int
    duplicates: int
    target_b_p99_ms: int
    met: bool


class _Outbox:
    """Lines of one lane's outbox file, counted as it grows."""

    def __init__(self, home: Path, lane: str) -> None:
        self.path = HomeLayout(home).outbox / f"{lane}.jsonl"
        self.lines = 0
        self._offset = 0

    def count(self) -> int:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
        if size > self._offset:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(size - self._offset)
            self._offset += len(data)
            self.lines += data.count(b"\n")
        return self.lines

    def stamps(self) -> list[tuple[str, int, int]]:
        """(delay message id, deliver_at ms, published_at ms) of every line."""
        out = []
        for raw in self.path.read_bytes().splitlines():
            line = json.loads(raw)
            out.append((line["delay_message_id"], parse_time_ms(line["deliver_at"]),
                        parse_time_ms(line["published_at"])))
        return out


def feeder(home: str, rate: int, stop: multiprocessing.synchronize.Event) -> None:
    """(child process) Queue ``rate`` messages a second on lane ``b`` until ``stop``."""
    logs = ShardLogs(Path(home), home_config(Path(home)))
    sent = 0
    begin = time.monotonic()
    try:
        while not stop.is_set():
            due = int((time.monotonic() - begin) * rate) + 1
            if due > sent:
                deliver_at_ms = now_ms() + B_LEAD_MS
                queue_due(logs, (Due(f"b{i}", f"k{i % 97}", deliver_at_ms)
                                 for i in range(sent, due)), lane="b", group=due - sent)
                sent = due
            time.sleep(0.01)
    finally:
        logs.close()


def _burst(home: Path, daemon: Daemon, count: int, prefix: str,
           deadline_s: float) -> tuple[int, bool]:
    """Queue ``count`` messages on ``a`` all due in one second once applied; (due ms,
    whether they were all applied before it)."""
    logs = open_logs(home)
    try:
        due_ms = now_ms() + max(5_000, count * QUEUE_US // 1_000)
        queue_due(logs, (Due(f"{prefix}{i}", f"k{i % 97}", due_ms) for i in range(count)),
                  lane="a", group=10_000)
        ends = logs.end_positions()
    finally:
        logs.close()

    def applied() -> bool:
        by_shard = {s["shard"]: s["applied_position"] for s in daemon.shards()}
        return all((by_shard[str(s)] or -1) >= end - 1 for s, end in ends.items())

    wait_until(applied, deadline_s, f"{count:,} herd messages applied", 0.1)
    return due_ms, now_ms() < due_ms


def herd(root: Path, count: int, rate: int, deadline_s: float) -> HerdFigures:
    home = make_home(root, "scale-herd-", partitions=PARTITIONS, lanes={"a": "", "b": ""})
    a_out, b_out = _Outbox(home, "a"), _Outbox(home, "b")
    daemon = Daemon.start(home)
    try:
        wait_until(daemon.all_active, 120, "every shard ACTIVE")
        solo = max(count // 10, 1)
        solo_due, _ = _burst(home, daemon, solo, "s", deadline_s)
        wait_until(lambda: a_out.count() >= solo, deadline_s, "the solo burst published", 0.01)
        solo_end = max(published for _, _, published in a_out.stamps())
        solo_rate = solo / max((solo_end - solo_due) / 1000, 1e-3)
        due_ms, in_time = _burst(home, daemon, count, "h", deadline_s)
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        child = context.Process(target=feeder, args=(str(home), rate, stop))
        time.sleep(max(0.0, (due_ms - now_ms()) / 1000 - 3))
        child.start()
        try:
            wait_until(lambda: a_out.count() >= solo + count, deadline_s, "the herd drained",
                       0.01)
        finally:
            stop.set()
            child.join(60)
        wait_until(lambda: daemon.states().get("SCHEDULED", 0) == 0, deadline_s,
                   "lane b drained", 0.1)
        held_back_ms = daemon.held_back_ms()
        stages = _stages(daemon.admin.get("/v1/metrics")["exposition"], "b")
    finally:
        daemon.stop()
    a_lines = [line for line in a_out.stamps() if line[0].startswith("h")]
    b_lines = b_out.stamps()
    a_end = max(published for _, _, published in a_lines)
    in_drain = sorted((deliver, published - deliver) for _, deliver, published in b_lines
                      if due_ms <= deliver <= a_end)
    during = sorted(late for _, late in in_drain)
    drain_s = max((a_end - due_ms) / 1000, 1e-3)
    ids = [line[0] for line in a_lines] + [line[0] for line in b_lines]
    p99 = percentile(during, 0.99)
    return HerdFigures(
        herd=count, b_rate_per_s=rate, solo_messages=solo, solo_rate_per_s=round(solo_rate),
        a_drain_s=round(drain_s, 2), a_rate_per_s=round(count / drain_s),
        a_vs_solo=round(count / drain_s / solo_rate, 3), applied_before_due=in_time,
        b_during_drain=len(during), b_lateness_p50_ms=percentile(during, 0.5),
        b_lateness_p99_ms=p99, b_lateness_max_ms=during[-1] if during else 0,
        b_p99_by_tenth_ms=_p99_by_tenth(in_drain), held_back_ms=held_back_ms,
        b_stages=stages, clock_error_ms=config_of(home).engine.max_clock_error_ms,
        early_a=sum(1 for _, deliver, published in a_lines if published < deliver),
        early_b=sum(1 for _, deliver, published in b_lines if published < deliver),
        duplicates=len(ids) - len(set(ids)),
        target_b_p99_ms=TARGET_B_P99_MS, met=bool(during) and p99 < TARGET_B_P99_MS)


def _stages(exposition: str, lane: str) -> Stages:
    """``lane``'s decision lateness and admission-to-outcome latency from the engine's
    histograms (summed over its shards)."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {"nereus_due_lag_seconds": "decided_after_action_at",
              "nereus_admission_outcome_latency_seconds": "admission_to_outcome"}
    found: dict[str, Stage] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name not in wanted:
            continue
        buckets: dict[float, float] = {}
        total = count = 0.0
        for sample in family.samples:
            if sample.labels.get("lane") != lane:
                continue
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
            elif sample.name.endswith("_count"):
                count += sample.value
        under = next((bound for bound, cumulative in sorted(buckets.items())
                      if cumulative >= 0.99 * count), None) if count else None
        found[wanted[family.name]] = Stage(
            count=int(count), mean_ms=round(total / count * 1000, 1) if count else None,
            p99_under_ms=None if under is None or under == float("inf") else under * 1000)
    empty = Stage(count=0, mean_ms=None, p99_under_ms=None)
    return Stages(**{name: found.get(name, empty) for name in wanted.values()})


def _p99_by_tenth(in_drain: list[tuple[int, int]]) -> list[int]:
    """The p99 lateness of each tenth of ``in_drain`` ((deliver_at, lateness), in
    deliver_at order): ten figures, fewer when it has fewer than ten entries."""
    bounds = [len(in_drain) * i // 10 for i in range(11)]
    return [percentile(sorted(late for _, late in in_drain[begin:end]), 0.99)
            for begin, end in itertools.pairwise(bounds) if end > begin]
