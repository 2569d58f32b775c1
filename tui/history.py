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
from typing import Any

from nereus.errors import NereusError
from nereus.timespec import parse_time_ms

KEEP = 60  # samples per series: one minute at the feed's one document per second

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


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


def document_time_ms(status: Mapping[str, Any]) -> int | None:
    """The document's Trusted UTC earliest, in epoch ms (None if absent or unreadable)."""
    text = (status.get("trusted_time") or {}).get("earliest")
    if not isinstance(text, str):
        return None
    try:
        return parse_time_ms(text)
    except NereusError:
        return None


def _counters(docs: Any, name_key: str) -> dict[str, int]:
    return {str(doc[name_key]): int(doc["admissions"]) for doc in docs or ()
            if name_key in doc and isinstance(doc.get("admissions"), int)}


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


def _append(series: tuple[Any, ...], value: Any, keep: int) -> tuple[Any, ...]:
    return (*series, value)[-keep:]


def advance(history: History, status: Mapping[str, Any], *, keep: int = KEEP) -> History:
    """The history after one more status document."""
    at_ms = document_time_ms(status)
    elapsed = None if at_ms is None or history.at_ms is None else at_ms - history.at_ms
    shard_counts = _counters(status.get("shards"), "shard")
    lane_counts = _counters(status.get("lanes"), "lane")
    lane_rates = _rates(lane_counts, history.lane_admissions, elapsed, history.lane_rates)
    backlog: dict[str, tuple[int, ...]] = {}
    rate_series: dict[str, tuple[float, ...]] = {}
    for doc in status.get("lanes") or ():
        name = str(doc.get("lane", "?"))
        level = doc.get("due_backlog")
        backlog[name] = _append(history.lane_backlog.get(name, ()),
                                level if isinstance(level, int) else 0, keep)
        rate = lane_rates.get(name)
        rate_series[name] = _append(history.lane_rate_series.get(name, ()),
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
