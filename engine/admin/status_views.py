"""What ``engine status`` reports of a live engine: each shard's loop and log position,
each lane across the shards (gate, readiness, backlog, due lag), each supervised worker,
and which of them are not healthy.

Reads of RocksDB here run on admin threads beside the shard loops; RocksDB reads are
thread-safe and never block the loops' writes.
"""

from __future__ import annotations

from collections.abc import Iterable

from nereus.engine.admin.documents import LaneShardView, LaneView, ShardView, WorkerView
from nereus.engine.engine import Engine
from nereus.engine.shard_loop import ShardLoop
from nereus.engine.shard_status import ShardState
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.values import Lane, decode_value
from nereus.timespec import format_time_ms
from nereus.views import due_backlog, open_attempts


def _unfinished(lane: Lane) -> bool:
    """The lane holds messages that are not finished (scheduled or admitted)."""
    return any(lane.counts.get(state, 0) for state in ("SCHEDULED", "PUBLISHING", "UNCERTAIN"))


def _lag(loop: ShardLoop, end: int, applied: int | None) -> int | None:
    """Records queued but not applied. Dense logs: the position difference; sparse ones
    (Pulsar) ask the backend, since positions jump between ledgers."""
    if getattr(loop.log, "dense", True):
        return end - (0 if applied is None else applied + 1)
    backlog = getattr(loop.log, "backlog", None)
    if backlog is None:
        return None
    try:
        found = backlog()
    except Exception:
        return None
    return None if found is None else int(found)


def _oldest_due_ms(loop: ShardLoop, lane: str, earliest_ms: int, count: int) -> list[int]:
    """actionAt of the ``count`` oldest due timeline entries of ``lane`` on this shard (the
    timeline is big-endian actionAt within a lane, so they are the first ``count`` keys)."""
    prefix = keys.timeline_lane_prefix(lane)
    start = max(loop.planner.floors.get(lane) or prefix, prefix)
    found: list[int] = []
    for key, _ in loop.store.scan(start, prefix + keys.u64(earliest_ms + 1)):
        found.append(keys.split_timeline_key(key)[1])
        if len(found) >= count:
            break
    return found


def due_lag_ms(loops: Iterable[ShardLoop], lane: str, earliest_ms: int,
               backlog: int) -> tuple[int | None, int | None]:
    """(p99, max) of how late the lane's due backlog is: Trusted UTC earliest minus actionAt
    over the due entries not yet admitted, nearest-rank p99, exact across shards.

    Only the oldest ``backlog - ceil(0.99 * backlog) + 1`` entries of each shard are read
    (the p99 is that rank counted from the oldest), so a large backlog costs 1 % of a scan.
    """
    if backlog <= 0:
        return None, None
    rank = backlog - (99 * backlog + 99) // 100 + 1  # ceil(0.99 n) in integers
    oldest = sorted(action_at for loop in loops
                    for action_at in _oldest_due_ms(loop, lane, earliest_ms, rank))
    if not oldest:
        return None, None
    return earliest_ms - oldest[min(rank, len(oldest)) - 1], earliest_ms - oldest[0]


# shard states that are not a healthy engine's (STARTING and RECOVERING pass on their own)
UNHEALTHY_SHARD_STATES = frozenset({ShardState.FAILED, ShardState.DEGRADED, ShardState.FENCED,
                                    ShardState.STOPPED})
UNHEALTHY_WORKER_STATES = frozenset({"FAILED", "BACKOFF"})


def health_problems(shards: list[ShardView], workers: list[WorkerView]) -> list[str]:
    """One line per shard or worker that is not healthy, with its reason."""
    problems = [f"shard {s.shard} is {s.state}: {s.error or 'no reason recorded'}"
                for s in shards if s.state in UNHEALTHY_SHARD_STATES]
    problems += [f"worker {w.name} is {w.state} after {w.restarts} restart(s): "
                 f"{w.last_error or 'no error recorded'}"
                 for w in workers if w.state in UNHEALTHY_WORKER_STATES]
    return problems



def worker_views(engine: Engine) -> list[WorkerView]:
    """Every supervised worker thread: its state, restarts and last error."""
    return [WorkerView(name=worker.name, kind=worker.kind, state=worker.state.value,
                       restarts=worker.restarts, last_error=worker.last_error,
                       last_error_at=None if worker.last_error_at_ms is None
                       else format_time_ms(worker.last_error_at_ms))
            for worker in engine.workers()]

def shard_views(engine: Engine) -> list[ShardView]:
    assert engine.clock is not None
    now = engine.clock.now()
    out = []
    for shard, loop in sorted(engine.shards.items()):
        status = loop.status()
        applied = status.applied_position
        try:
            end: int | None = loop.log.end_position()
            log_error = None
        except Exception as exc:  # a damaged or unreachable log must not hide the rest
            end, log_error = None, f"{type(exc).__name__}: {exc}"
        out.append(ShardView(
            shard=str(shard), state=status.state.value, epoch=status.epoch,
            applied_position=applied, log_end_position=end,
            lag=None if end is None else _lag(loop, end, applied),
            caught_up=end is not None and (applied + 1 if applied is not None else 0) >= end,
            claims=status.claims, in_flight=status.in_flight, admissions=status.admissions,
            uncertain=sum(1 for _ in open_attempts(loop.store, state="UNKNOWN")),
            error=status.error or log_error, waiting=status.waiting,
            due_backlog=sum(due_backlog(loop.store, name, now.earliest_ms,
                                        start=loop.planner.floors.get(name))
                            for name in engine.publishers)))
    return out

def lane_views(engine: Engine) -> list[LaneView]:
    """Every configured lane, then every lane that has messages but no configuration
    (readiness UNCONFIGURED: its messages are never published until it is configured)."""
    assert engine.clock is not None
    now = engine.clock.now()
    loops = sorted(engine.shards.items())
    replicated: dict[str, dict[ShardId, Lane]] = {}
    for shard, loop in loops:
        for _, raw in loop.store.scan_prefix(keys.LANE):
            lane = decode_value(raw, Lane)
            replicated.setdefault(lane.name, {})[shard] = lane
    names = sorted(engine.publishers) + sorted(
        name for name, by_shard in replicated.items()
        if name not in engine.publishers and any(_unfinished(lane)
                                                      for lane in by_shard.values()))
    out = []
    for name in names:
        publisher = engine.publishers.get(name)
        gates: set[str] = set()
        backlog = open_attempts_count = 0
        counts: dict[str, int] = {}
        admissions = 0
        per_shard: list[LaneShardView] = []
        for shard, loop in loops:
            lane = replicated.get(name, {}).get(shard) or Lane(name=name)
            gates.add(lane.gate.value)
            shard_backlog = due_backlog(loop.store, name, now.earliest_ms,
                                        start=loop.planner.floors.get(name))
            backlog += shard_backlog
            open_attempts_count += lane.open_attempts
            admissions += lane.admissions
            for state, n in lane.counts.items():
                counts[state] = counts.get(state, 0) + n
            per_shard.append(LaneShardView(shard=str(shard), gate=lane.gate.value,
                                           due_backlog=shard_backlog,
                                           open_attempts=lane.open_attempts,
                                           admissions=lane.admissions))
        lag_p99, lag_max = due_lag_ms(list(engine.shards.values()), name, now.earliest_ms,
                                      backlog)
        why: str | None
        if publisher is None:
            readiness, why = "UNCONFIGURED", (
                f"no [lanes.{name}] in {engine.config.source}: its messages wait "
                "until the lane is configured")
        else:
            readiness = "READY" if publisher.ready else "NOT_READY"
            why = publisher.not_ready_reason
        out.append(LaneView(
            lane=name,
            destination=None if publisher is None
            else engine.config.lanes[name].destination,
            gate="CLOSED" if "CLOSED" in gates else "OPEN", readiness=readiness,
            not_ready_reason=why, due_backlog=backlog,
            in_flight=engine.permits.in_flight(name),
            open_attempts=open_attempts_count,
            published=0 if publisher is None else publisher.published,
            failures=0 if publisher is None else publisher.failures,
            messages_by_state=counts, admissions=admissions, due_lag_p99_ms=lag_p99,
            due_lag_max_ms=lag_max, shards=per_shard))
    return out
