"""One exposition from the worker processes' own (``engine start --workers N``).

Workers own disjoint shards and each shard-labelled series comes from its owner, so the
samples do not overlap and concatenating is exact; while a shard moves, only the process
its ownership record names is kept for it. Series without a shard label merge by meaning:
``nereus_worker_restarts_total`` gets its ``worker`` label prefixed with the process;
``nereus_lane_ready`` takes the lowest; ``nereus_due_lag_max_seconds``,
``nereus_trusted_time_held_back_seconds`` and the last payload collection the largest;
anything else with the same name and labels is summed (memory, budgets, caches, payload
rounds). A worker that does not answer is left out and counted in the front door's
``nereus_worker_scrape_errors``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from nereus.adapters.admin.wire import MetricsExposition, WorkerView
from nereus.engine.metrics.collect import exposition_of
from nereus.engine.metrics.payload_gc_families import LAST_SUCCESS as PAYLOAD_GC_LAST_SUCCESS

LOWEST: Final = frozenset({"nereus_lane_ready"})
HIGHEST: Final = frozenset({"nereus_due_lag_max_seconds",
                            "nereus_trusted_time_held_back_seconds", PAYLOAD_GC_LAST_SUCCESS})
RESTARTS: Final = "nereus_worker_restarts"


def merge(parts: Sequence[tuple[str, str]], *, own: Iterable[Metric] = (),
          unanswered: int = 0, owners: Mapping[str, str] | None = None) -> str:
    """``parts``: (process name, its exposition text); ``own``: the front door's families;
    ``owners``: shard -> the process that owns it now, when known (a shard's series from
    any other process, one letting the shard go in a move, are left out).
    One exposition in which each sample appears once."""
    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}

    def add(family: Metric, process: str | None) -> None:
        kept = families.get(family.name)
        if kept is None:
            kept = families[family.name] = Metric(family.name, family.documentation,
                                                  family.type, family.unit)
            values[family.name] = {}
        samples = values[family.name]
        for sample in family.samples:
            labels = dict(sample.labels)
            shard = labels.get("shard")
            if process is not None and shard is not None and owners is not None and \
                    owners.get(shard, process) != process:
                continue
            if process is not None and family.name == RESTARTS and "worker" in labels:
                labels["worker"] = f"{process}/{labels['worker']}"
            key = (sample.name, tuple(labels.items()))
            if key not in samples:
                samples[key] = sample.value
            elif family.name in LOWEST:
                samples[key] = min(samples[key], sample.value)
            elif family.name in HIGHEST:
                samples[key] = max(samples[key], sample.value)
            else:
                samples[key] += sample.value

    for family in own:
        add(family, None)
    for process, text in parts:
        for family in text_string_to_metric_families(text):
            add(family, process)
    errors = GaugeMetricFamily(
        "nereus_worker_scrape_errors", "Worker processes that did not answer this scrape "
        "(their series are missing from it)")
    errors.add_metric([], unanswered)
    add(errors, None)
    out = []
    for name, family in families.items():
        for (sample_name, labels), value in values[name].items():
            family.add_sample(sample_name, dict(labels), value)
        out.append(family)
    return exposition_of(out)


def merged_exposition(answers: Sequence[object], members: Sequence[str],
                      own_workers: Iterable[WorkerView],
                      owners: Mapping[str, str] | None = None,
                      own: Iterable[Metric] = ()) -> MetricsExposition:
    """The front door's ``/v1/metrics``: each worker's answer to it (by index; an error for
    one that did not answer) merged with the front door's own worker restarts and resident
    memory, and ``own`` (its payload collection's); ``owners``: shard -> the member owning
    it now."""
    import msgspec

    from nereus.engine.metrics.collect import restarts_family
    from nereus.engine.metrics.listener import CONTENT_TYPE
    from nereus.engine.metrics.memory_gauges import resident_family

    parts: list[tuple[str, str]] = []
    unanswered = 0
    for member, answer in zip(members, answers, strict=True):
        try:
            parts.append((member, msgspec.convert(answer, MetricsExposition).exposition))
        except msgspec.ValidationError:
            unanswered += 1
    return MetricsExposition(content_type=CONTENT_TYPE, exposition=merge(
        parts, own=[restarts_family(own_workers), resident_family(), *own],
        unanswered=unanswered,
        owners=owners))
