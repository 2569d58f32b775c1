"""The dashboard's memory: a pure fold over feed documents giving rates and chart series.

The engine reports counters (admissions per shard and per lane) and levels (due backlog);
rates are differences between two documents divided by the engine's own Trusted UTC
(``trusted_time.earliest``) between them, never the dashboard's wall clock, so the same
documents always give the same numbers. A counter that goes down (the engine restarted)
restarts the rate instead of showing a negative one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from nereus.adapters.admin.wire import EngineStatus
from nereus.errors import NereusError
from nereus.timespec import parse_time_ms

KEEP = 60  # samples per series: one minute at the feed's one document per second
V = TypeVar("V")

_EMPTY: Mapping[str, object] = MappingProxyType({})


def _empty() -> Mapping[str, V]:
    return _EMPTY  # type: ignore[return-value]  # one empty mapping, never written


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """What earlier feed documents leave behind for the next one."""

    ticks: int = 0
    at_ms: int | None = None
    shard_admissions: Mapping[str, int] = field(default_factory=_empty)
    lane_admissions: Mapping[str, int] = field(default_factory=_empty)
    shard_rates: Mapping[str, float | None] = field(default_factory=_empty)
    lane_rates: Mapping[str, float | None] = field(default_factory=_empty)
    lane_backlog: Mapping[str, tuple[int, ...]] = field(default_factory=_empty)
    lane_rate_series: Mapping[str, tuple[float, ...]] = field(default_factory=_empty)


def document_time_ms(status: EngineStatus) -> int | None:
    """The document's Trusted UTC earliest, in epoch ms (None if unreadable)."""
    try:
        return parse_time_ms(status.trusted_time.earliest)
    except NereusError:
        return None


def _rates(now: Mapping[str, int], before: Mapping[str, int], elapsed_ms: int | None,
           previous: Mapping[str, float | None]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, count in now.items():
        old = before.get(name)
        if elapsed_ms is None or old is None or count < old:
            out[name] = None
        elif elapsed_ms <= 0:
            out[name] = previous.get(name)  # the same instant twice: keep the last rate
        else:
            out[name] = (count - old) * 1000 / elapsed_ms
    return out


def _append(series: tuple[V, ...], value: V, keep: int) -> tuple[V, ...]:
    return (*series, value)[-keep:]


def advance(history: History, status: EngineStatus, *, keep: int = KEEP) -> History:
    """The history after one more status document."""
    at_ms = document_time_ms(status)
    elapsed = None if at_ms is None or history.at_ms is None else at_ms - history.at_ms
    shard_counts = {doc.shard: doc.admissions for doc in status.shards}
    lane_counts = {doc.lane: doc.admissions for doc in status.lanes}
    lane_rates = _rates(lane_counts, history.lane_admissions, elapsed, history.lane_rates)
    backlog: dict[str, tuple[int, ...]] = {}
    rate_series: dict[str, tuple[float, ...]] = {}
    for doc in status.lanes:
        backlog[doc.lane] = _append(history.lane_backlog.get(doc.lane, ()), doc.due_backlog,
                                    keep)
        rate = lane_rates.get(doc.lane)
        rate_series[doc.lane] = _append(history.lane_rate_series.get(doc.lane, ()),
                                        0.0 if rate is None else rate, keep)
    return History(
        ticks=history.ticks + 1,
        at_ms=at_ms if at_ms is not None else history.at_ms,
        shard_admissions=MappingProxyType(shard_counts),
        lane_admissions=MappingProxyType(lane_counts),
        shard_rates=MappingProxyType(_rates(shard_counts, history.shard_admissions, elapsed,
                                            history.shard_rates)),
        lane_rates=MappingProxyType(lane_rates),
        lane_backlog=MappingProxyType(backlog),
        lane_rate_series=MappingProxyType(rate_series),
    )
