"""The Prometheus exposition of one engine process, collected at scrape time.

Gauges are read when Prometheus asks, from what the engine already keeps (the reads of
``engine status``): nothing on the hot path. Counters are replicated (a lane's admissions,
surviving restarts) or a shard loop's plain ints (``shard.ShardMetrics``,
``Applier.applied_records``), which reset when a loop or process restarts (``rate()``
handles it); histograms are ``ShardMetrics``' bucket lists. Names follow Prometheus's
conventions; labels are bounded (``route``, ``shard``, ``lane``, ``state``, ``reason``,
``outcome``, ``worker``, ``kind``), never a message. Every shard-labelled series comes from
the one process owning the shard, which lets the front door merge workers' expositions
exactly (``exposition_merge``; ``docs/decisions/0016-metrics-merged-by-the-front-door.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from nereus.adapters.admin.wire import LaneView, WorkerView
from nereus.engine.admin.status_views import (
    StatusReads,
    lane_views,
    shard_views,
    worker_views,
)
from nereus.engine.metrics.memory_gauges import memory_families
from nereus.engine.metrics.payload_gc_families import payload_gc_families
from nereus.engine.metrics.shard_families import LANE_OF_SHARD, ShardFamilies
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.records import MessageState

if TYPE_CHECKING:
    from nereus.engine.process.home_engine import Engine

MESSAGE_STATES: Final = tuple(state.value for state in MessageState)


class EngineCollector(Collector):
    """Every metric family of one engine process (module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        reads = StatusReads(engine)  # each lane value and due range read once per scrape
        shards = shard_views(engine, reads)
        lanes = lane_views(engine, reads)
        yield from ShardFamilies(engine.config.lanes).of(shards, engine.shards)
        yield from _lane_families(engine, lanes)
        yield restarts_family(worker_views(engine))
        if engine.clock is not None:
            yield held_back_family(engine.clock)
        yield from memory_families(engine)
        if engine.payloads is not None and engine.payloads.interval_s > 0:  # it collects
            yield from payload_gc_families(engine.payloads)


def held_back_family(clock: TrustedClock) -> Metric:
    """``nereus_trusted_time_held_back_seconds``: how far Trusted UTC is held behind the
    wall clock after a step forwards (``engine.clock``), read now."""
    clock.now()
    family = GaugeMetricFamily(
        "nereus_trusted_time_held_back_seconds", "How far Trusted UTC's earliest is held "
        "behind the wall clock after it stepped forwards while the engine ran: every "
        "decision waits this much longer until a restart, or with chrony until it has said "
        "the clock is unsynchronised and then synchronised (0: none)")
    family.add_metric([], clock.held_back_ms / 1000)
    return family


def _lane_families(engine: Engine, lanes: Iterable[LaneView]) -> Iterator[Metric]:
    admissions = CounterMetricFamily(
        "nereus_admissions", "Winning PUBLISH_ADMISSION records (replicated: kept across "
        "restarts)", labels=LANE_OF_SHARD)
    messages = GaugeMetricFamily(
        "nereus_messages", "Messages by state (replicated lane counters)",
        labels=[*LANE_OF_SHARD, "state"])
    pending = GaugeMetricFamily(
        "nereus_pending_messages", "Messages SCHEDULED (waiting for their time or their lane)",
        labels=LANE_OF_SHARD)
    uncertain = GaugeMetricFamily(
        "nereus_uncertain_messages", "Messages UNCERTAIN now (an UNKNOWN attempt open)",
        labels=LANE_OF_SHARD)
    due = GaugeMetricFamily(
        "nereus_due_messages", "Due backlog: SCHEDULED messages whose time has come, not yet "
        "admitted (counted up to 10,000 per shard and lane: at least that many beyond)",
        labels=LANE_OF_SHARD)
    gate = GaugeMetricFamily(
        "nereus_lane_gate_open", "1 while the lane's admission gate is OPEN on the shard",
        labels=LANE_OF_SHARD)
    ready = GaugeMetricFamily(
        "nereus_lane_ready", "1 while the lane's publisher is READY (0: NOT_READY or "
        "UNCONFIGURED)", labels=["lane"])
    lag_max = GaugeMetricFamily(
        "nereus_due_lag_max_seconds", "How late the lane's oldest due, not yet admitted "
        "message is now (0 with no due backlog)", labels=["lane"])
    oldest = GaugeMetricFamily(
        "nereus_uncertain_oldest_age_seconds", "How long the lane's oldest UNKNOWN attempt "
        "has been open, since its admission (0 with none)", labels=["lane"])
    fenced = GaugeMetricFamily(
        "nereus_lane_fenced", "1 when the lane fences a dead owner's sends (its in-flight "
        "attempts are settled exactly at the next recovery), 0: they stay UNCERTAIN",
        labels=["lane"])
    for lane in lanes:
        ready.add_metric([lane.lane], 1 if lane.readiness == "READY" else 0)
        oldest.add_metric([lane.lane], (lane.uncertain_oldest_age_ms or 0) / 1000)
        fenced.add_metric([lane.lane], 1 if lane.fencing else 0)
        lag_max.add_metric([lane.lane], (lane.due_lag_max_ms or 0) / 1000)
        by_shard = {view.shard: view for view in lane.shards}
        for shard_text, view in by_shard.items():
            labels = [shard_text.rpartition("/")[0], shard_text, lane.lane]
            admissions.add_metric(labels, view.admissions)
            due.add_metric(labels, view.due_backlog)
            gate.add_metric(labels, 1 if view.gate == "OPEN" else 0)
        for shard_text, counts in _lane_counts(engine, lane.lane).items():
            labels = [shard_text.rpartition("/")[0], shard_text, lane.lane]
            for name in MESSAGE_STATES:
                messages.add_metric([*labels, name], counts.get(name, 0))
            pending.add_metric(labels, counts.get("SCHEDULED", 0))
            uncertain.add_metric(labels, counts.get("UNCERTAIN", 0))
    yield from (admissions, messages, pending, uncertain, due, gate, ready, lag_max, oldest,
                fenced)


def _lane_counts(engine: Engine, lane: str) -> dict[str, dict[str, int]]:
    """The lane's replicated message counts on each shard of this process."""
    from nereus.state import keys
    from nereus.state.values import Lane, decode_value

    out: dict[str, dict[str, int]] = {}
    for shard, loop in sorted(engine.shards.items()):
        raw = loop.store.get(keys.lane_key(lane))
        out[str(shard)] = {} if raw is None else dict(decode_value(raw, Lane).counts)
    return out


def restarts_family(workers: Iterable[WorkerView]) -> Metric:
    """``nereus_worker_restarts_total``: each supervised worker's restarts."""
    family = CounterMetricFamily(
        "nereus_worker_restarts", "Restarts of a supervised worker (thread, or worker "
        "process of the front door) after a crash", labels=["worker", "kind"])
    for worker in workers:
        family.add_metric([worker.name, worker.kind], worker.restarts)
    return family


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def render(collector: Collector) -> str:
    """The text exposition format (0.0.4) of what ``collector`` yields."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def exposition(engine: Engine) -> str:
    """This engine process's metrics as Prometheus text."""
    return render(EngineCollector(engine))


def exposition_of(families: Iterable[Metric]) -> str:
    """Ready metric families as Prometheus text (the front door's merge)."""
    return render(_Families(families))
