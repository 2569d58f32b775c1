"""The shard-labelled metric families of one engine process: read at scrape time from the
shards' status views (positions, lag, state, fencing epoch, UNKNOWN attempts) and their
loops' plain counters and histograms (``shard_counters.ShardMetrics``), which reset when a
loop restarts. Every series of a shard comes from the one process owning it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from nereus.engine.metrics.shard_counters import Buckets
from nereus.engine.scheduler.claims import Revocation
from nereus.engine.shard.loop_status import ShardState
from nereus.shard import ShardId

if TYPE_CHECKING:
    from nereus.adapters.admin.wire import ShardView
    from nereus.engine.shard.owner_loop import ShardLoop

SHARD: Final = ["route", "shard"]
LANE_OF_SHARD: Final = ["route", "shard", "lane"]


class ShardFamilies:
    """The families, filled from every shard of the process by ``of``."""

    def __init__(self, configured_lanes: Iterable[str]) -> None:
        self.configured_lanes = set(configured_lanes)
        self.applied = CounterMetricFamily(
            "nereus_commands_applied", "Shard Log records applied by this shard's owner "
            "since its loop started (client commands, system and operator records)", labels=SHARD)
        self.position = GaugeMetricFamily(
            "nereus_applied_position", "The last applied and synced Shard Log position",
            labels=SHARD)
        self.end = GaugeMetricFamily(
            "nereus_log_end_position", "The Shard Log's end position (next to be written)",
            labels=SHARD)
        self.lag = GaugeMetricFamily(
            "nereus_command_topic_lag_records", "Shard Log (Command Topic) records queued but "
            "not yet applied", labels=SHARD)
        self.age = GaugeMetricFamily(
            "nereus_checkpoint_age_seconds", "Seconds since this owner's last checkpoint of "
            "the shard (since its loop started, before the first)", labels=SHARD)
        self.state = GaugeMetricFamily(
            "nereus_shard_state", "1 for the shard's current state, 0 for the others",
            labels=[*SHARD, "state"])
        self.epoch = GaugeMetricFamily(
            "nereus_fencing_epoch", "The fencing epoch this owner activated", labels=SHARD)
        self.fencing = CounterMetricFamily(
            "nereus_fencing_events", "Fencing events: admissions refused STALE FENCED and "
            "this owner fenced by a later one", labels=SHARD)
        self.unknown = GaugeMetricFamily(
            "nereus_unknown_attempts", "Attempts UNKNOWN now (sent or not: evidence decides)",
            labels=SHARD)
        self.stale = CounterMetricFamily(
            "nereus_stale_admissions", "PUBLISH_ADMISSION records that did not win, by reason",
            labels=[*SHARD, "reason"])
        self.outcomes = CounterMetricFamily(
            "nereus_publish_outcomes", "PUBLISH_OUTCOME records applied, by outcome",
            labels=[*LANE_OF_SHARD, "outcome"])
        self.due_lag = HistogramMetricFamily(
            "nereus_due_lag_seconds", "How late admissions were decided after their "
            "actionAt (Trusted UTC earliest minus actionAt)", labels=LANE_OF_SHARD)
        self.latency = HistogramMetricFamily(
            "nereus_admission_outcome_latency_seconds", "Seconds from an admission applied "
            "to its outcome applied", labels=LANE_OF_SHARD)
        self.claims = CounterMetricFamily(
            "nereus_claims", "Claims made: due work reserved for this owner (reversible, "
            "no attempt consumed; counted apart from admissions)", labels=LANE_OF_SHARD)
        self.claim_latency = HistogramMetricFamily(
            "nereus_claim_latency_seconds", "A Claim's local preparation: revalidation, "
            "permits, payload and template", labels=LANE_OF_SHARD)
        self.revocations = CounterMetricFamily(
            "nereus_claim_revocations", "Claims ended before their attempt reached a "
            "publisher, by reason (deadline, stale_admission, fenced, handover)",
            labels=[*LANE_OF_SHARD, "reason"])

    def of(self, views: Iterable[ShardView], loops: Mapping[ShardId, ShardLoop]
           ) -> list[Metric]:
        """Every family, with the series of each shard in ``views``; the counters of those
        whose loop runs here (``loops``)."""
        by_name = {str(shard): loop for shard, loop in loops.items()}
        for view in views:
            labels = [view.shard.rpartition("/")[0], view.shard]
            self._add_view(labels, view)
            loop = by_name.get(view.shard)
            if loop is not None:
                self._add_counters(labels, loop)
        return [self.applied, self.position, self.end, self.lag, self.age, self.state,
                self.epoch, self.fencing, self.unknown, self.stale, self.outcomes,
                self.due_lag, self.latency, self.claims, self.claim_latency, self.revocations]

    def _add_view(self, labels: list[str], view: ShardView) -> None:
        if view.applied_position is not None:
            self.position.add_metric(labels, view.applied_position)
        if view.log_end_position is not None:
            self.end.add_metric(labels, view.log_end_position)
        if view.lag is not None:
            self.lag.add_metric(labels, view.lag)
        for name in ShardState:
            self.state.add_metric([*labels, name.value], 1 if view.state == name.value else 0)
        self.epoch.add_metric(labels, view.epoch)
        self.unknown.add_metric(labels, view.uncertain)

    def _add_counters(self, labels: list[str], loop: ShardLoop) -> None:
        records, since_checkpoint_s = loop.metric_readings()
        self.applied.add_metric(labels, records)
        self.age.add_metric(labels, since_checkpoint_s)
        counts = loop.metrics
        self.fencing.add_metric(labels, counts.fencing_events)
        for reason, n in sorted(counts.stale.items()):
            self.stale.add_metric([*labels, reason], n)
        for (lane, outcome), n in sorted(counts.outcomes.items()):
            self.outcomes.add_metric([*labels, lane, outcome], n)
        _histograms(self.due_lag, labels, counts.due_lag)
        _histograms(self.latency, labels, counts.outcome_latency)
        # every configured lane's claim series from zero, so a rate exists before the
        # first claim or revocation (as the admission stale reasons are)
        claim_lanes = sorted(self.configured_lanes | set(counts.claims)
                             | {lane for lane, _ in counts.revocations})
        for lane in claim_lanes:
            self.claims.add_metric([*labels, lane], counts.claims.get(lane, 0))
        _histograms(self.claim_latency, labels, counts.claim_latency)
        reasons = sorted({r.value for r in Revocation} | {r for _, r in counts.revocations})
        for lane in claim_lanes:
            for reason in reasons:
                self.revocations.add_metric([*labels, lane, reason],
                                       counts.revocations.get((lane, reason), 0))


def _histograms(family: HistogramMetricFamily, labels: list[str],
                by_lane: dict[str, Buckets]) -> None:
    for lane, buckets in sorted(by_lane.items()):
        cumulative, total = buckets.cumulative()
        family.add_metric([*labels, lane], cumulative, total)
