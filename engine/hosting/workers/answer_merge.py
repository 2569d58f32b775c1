"""The worker processes' answers merged into the documents one engine answers with, so
``engine status``, ``shard list``, ``lane list`` and the dashboard read the same shape
whatever the number of processes.

* shards: the union, in shard order; a configured shard no worker holds (between its
  owner's death and its new owner's activation) is listed UNOWNED, and is a problem;
* lanes: one per lane name; counts, backlogs and in-flight summed over the workers, the
  gate CLOSED if any shard's is, readiness the worst of the workers', the due lag the
  largest (each worker's p99 is exact over its shards; the largest bounds the merged
  p99 from above — conservative, never optimistic), per-shard rows concatenated;
* workers: the front door's own (``process-<K>``, the admin socket), then each worker's
  threads named ``worker-<K>/<name>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

from nereus.adapters.admin.wire import LaneView, ShardView, WorkerView
from nereus.engine.runtime.supervisor import Supervisor
from nereus.errors import NereusError
from nereus.shard import ShardId
from nereus.timespec import format_time_ms

T = TypeVar("T")

UNOWNED = "UNOWNED"
_READINESS_ORDER = ("NOT_READY", "UNCONFIGURED", "READY")


def shard_key(view_shard: str) -> tuple[str, int]:
    shard = ShardId.parse(view_shard)
    return shard.route, shard.partition


def unowned(shard: ShardId) -> ShardView:
    """A configured shard that no worker holds right now."""
    return ShardView(shard=str(shard), state=UNOWNED, epoch=0, applied_position=None,
                     log_end_position=None, lag=None, caught_up=False, claims=0,
                     in_flight=0, admissions=0, uncertain=0,
                     error="no worker owns it now (it is moving to another worker)",
                     waiting=None, due_backlog=0)


def merge_shards(answers: Iterable[list[ShardView]], configured: Iterable[ShardId]
                 ) -> list[ShardView]:
    """Every worker's shards, and every configured shard none of them holds."""
    found: dict[str, ShardView] = {}
    for views in answers:
        for view in views:
            held = found.get(view.shard)
            if held is None or held.state == UNOWNED or view.epoch > held.epoch:
                found[view.shard] = view
    for shard in configured:
        found.setdefault(str(shard), unowned(shard))
    return sorted(found.values(), key=lambda view: shard_key(view.shard))


def _max(values: Iterable[int | None]) -> int | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def merge_lane(views: list[LaneView]) -> LaneView:
    """One lane as every worker sees it (its own shards), as one engine would see it."""
    first = views[0]
    counts: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for view in views:
        for state, n in view.messages_by_state.items():
            counts[state] = counts.get(state, 0) + n
        for why, n in view.waiting_by_reason.items():
            waiting[why] = waiting.get(why, 0) + n
    worst = min(views, key=lambda view: _READINESS_ORDER.index(view.readiness)
                if view.readiness in _READINESS_ORDER else -1)
    return LaneView(
        lane=first.lane, destination=first.destination,
        gate="CLOSED" if any(view.gate == "CLOSED" for view in views) else "OPEN",
        readiness=worst.readiness, not_ready_reason=worst.not_ready_reason,
        due_backlog=sum(view.due_backlog for view in views),
        in_flight=sum(view.in_flight for view in views),
        open_attempts=sum(view.open_attempts for view in views),
        published=sum(view.published for view in views),
        published_since_start=sum(view.published_since_start for view in views),
        failures=sum(view.failures for view in views),
        messages_by_state=dict(sorted(counts.items())),
        admissions=sum(view.admissions for view in views),
        due_lag_p99_ms=_max(view.due_lag_p99_ms for view in views),
        due_lag_max_ms=_max(view.due_lag_max_ms for view in views),
        due_backlog_capped=any(view.due_backlog_capped for view in views),
        waiting_by_reason=dict(sorted(waiting.items())),
        uncertain=sum(view.uncertain for view in views),
        uncertain_oldest_age_ms=_max(view.uncertain_oldest_age_ms for view in views),
        fencing=first.fencing,
        shards=sorted((row for view in views for row in view.shards),
                      key=lambda row: shard_key(row.shard)))


def merge_lanes(answers: Iterable[list[LaneView]]) -> list[LaneView]:
    """The lanes in the order the first worker lists them (configured, then unconfigured
    ones with messages), then any only a later worker has."""
    by_name: dict[str, list[LaneView]] = {}
    for views in answers:
        for view in views:
            by_name.setdefault(view.lane, []).append(view)
    return [merge_lane(views) for views in by_name.values()]


def prefixed(worker: str, views: Iterable[WorkerView]) -> list[WorkerView]:
    """A worker process's threads, named after it."""
    return [WorkerView(name=f"{worker}/{view.name}", kind=view.kind, state=view.state,
                       restarts=view.restarts, last_error=view.last_error,
                       last_error_at=view.last_error_at) for view in views]


def own_workers(supervisor: Supervisor) -> list[WorkerView]:
    """The front door's own workers: one per worker process, and its admin socket."""
    return [WorkerView(name=w.name, kind=w.kind, state=w.state.value, restarts=w.restarts,
                       last_error=w.last_error,
                       last_error_at=None if w.last_error_at_ms is None
                       else format_time_ms(w.last_error_at_ms))
            for w in supervisor.statuses()]


def listed(body: Any, key: str, kind: type[T]) -> list[T]:
    """A worker's answer ``body[key]``, decoded as a list of ``kind``."""
    return msgspec.convert(body[key], list[kind])  # type: ignore[valid-type]


def answered(answers: list[T | NereusError]) -> list[T]:
    """The answers that are not errors (a worker that did not answer is left out)."""
    return [answer for answer in answers if not isinstance(answer, NereusError)]
