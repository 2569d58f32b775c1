"""The metric families of a process's payload collection (``payload_collector``): read
from its plain counters at scrape time, only where the process runs one (the single engine,
the front door of ``--workers N``, each engine or worker of a node of a cluster). The
front door's merge sums the counters over its processes and keeps the latest success.
"""

from __future__ import annotations

from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from nereus.engine.process.payload_collector import PayloadCollector

LAST_SUCCESS: Final = "nereus_payload_gc_last_success_timestamp_seconds"


def payload_gc_families(collector: PayloadCollector) -> list[Metric]:
    """Rounds, failed rounds, objects and bytes deleted, and when the last round ended."""
    rounds = CounterMetricFamily(
        "nereus_payload_gc_rounds", "Large-payload collection rounds that ran to the end "
        "(every [engine] payload_gc_interval)")
    failures = CounterMetricFamily(
        "nereus_payload_gc_failures", "Large-payload collection rounds that failed (the "
        "object store or a Shard Log unreachable, a shard refused: the engine log's "
        "payload_gc_failed says why); the next round runs at its time")
    objects = CounterMetricFamily(
        "nereus_payload_gc_deleted_objects", "Large-payload objects deleted by the collection "
        "(expired reservations, objects whose stage is gone)")
    size = CounterMetricFamily(
        "nereus_payload_gc_deleted_bytes", "Bytes of the large-payload objects deleted by the "
        "collection")
    last = GaugeMetricFamily(
        LAST_SUCCESS, "When the last large-payload collection round ended (Unix seconds; 0: "
        "none yet since the process started)")
    rounds.add_metric([], collector.rounds)
    failures.add_metric([], collector.failures)
    objects.add_metric([], collector.deleted)
    size.add_metric([], collector.deleted_bytes)
    last.add_metric([], (collector.last_success_ms or 0) / 1000)
    return [rounds, failures, objects, size, last]
