"""What ``engine status`` reports of a live engine: each shard's loop and log position,
each lane across the shards (gate, readiness, backlog, due lag), each supervised worker,
and which of them are not healthy.

Reads of RocksDB here run on admin threads beside the shard loops; RocksDB reads are
thread-safe and never block the loops' writes. They are bounded whatever the backlog or
the history (the feed sends one of these documents a second): messages by state,
UNCERTAIN messages and open attempts come from the lane values ``apply`` keeps (replicated,
so a replayed shard reports the same), and each lane's due backlog and lag from one seek
that reads at most ``DUE_SCAN_CAP`` timeline keys per shard (``due_backlog_capped``: more
are due than were counted).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Final

from nereus.adapters.admin.wire import (
    LaneShardView,
    LaneView,
    ShardView,
    TrustedTimeView,
    WorkerView,
)
from nereus.engine.process.home_engine import Engine
from nereus.engine.runtime.trusted_clock import TrustedClock
from nereus.engine.shard.loop_status import RefusedShard, ShardState
from nereus.engine.shard.owner_loop import ShardLoop
from nereus.shard import ShardId
from nereus.state import keys
from nereus.state.store import ShardStore
from nereus.state.values import Lane, decode_value
from nereus.timespec import format_time_ms
from nereus.views import open_attempts


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


# How many due timeline entries one status document reads per shard and lane, at most: a
# backlog beyond it is reported as "at least" (``due_backlog_capped``) instead of counted,
# so the once-a-second feed costs the same with a thousand due messages or ten million.
DUE_SCAN_CAP: Final = 10_000


@dataclass(frozen=True, slots=True)
class DueSample:
    """The oldest due, not yet admitted, timeline entries of one lane on one shard: their
    actionAt, oldest first, at most the cap; ``capped`` when more are due than were read."""

    action_ats: list[int]
    capped: bool


def due_sample(loop: ShardLoop, lane: str, earliest_ms: int, *,
               cap: int = DUE_SCAN_CAP) -> DueSample:
    """One bounded seek and at most ``cap + 1`` keys: the timeline is big-endian actionAt
    within a lane, so the oldest due entries are the first keys from the planner's floor."""
    prefix = keys.timeline_lane_prefix(lane)
    start = max(loop.planner.floors.get(lane) or prefix, prefix)
    found: list[int] = []
    at = len(prefix)
    for key, _ in loop.store.scan(start, prefix + keys.u64(earliest_ms + 1)):
        if len(found) >= cap:
            return DueSample(found, True)
        found.append(int.from_bytes(key[at:at + 8], "big"))
    return DueSample(found, False)


def due_lag_ms(samples: Iterable[DueSample], earliest_ms: int) -> tuple[int | None, int | None]:
    """(p99, max) of how late a lane's due backlog is, over its shards' samples: Trusted
    UTC earliest minus actionAt, nearest-rank p99.

    Exact when no sample is capped. When one is, the p99 is taken over the entries read
    (every shard's oldest, up to the cap): with ``n`` read the rank counted from the oldest
    is ``n - ceil(0.99 n) + 1``, no larger than the true backlog's, so the value is an upper
    bound of the true p99 (never optimistic). The max is always exact (the oldest entry).
    """
    oldest = sorted(action_at for sample in samples for action_at in sample.action_ats)
    if not oldest:
        return None, None
    n = len(oldest)
    rank = n - (99 * n + 99) // 100 + 1  # ceil(0.99 n) in integers
    return earliest_ms - oldest[rank - 1], earliest_ms - oldest[0]


class StatusReads:
    """What one status document reads of the shards' stores, each read once however many
    views ask: every shard's lane values (counters kept by ``apply``; one short prefix scan,
    one key per lane) and each (shard, lane)'s due sample (one capped seek). Nothing here
    grows with the backlog or the history."""

    def __init__(self, engine: Engine) -> None:
        assert engine.clock is not None
        self.earliest_ms = engine.clock.now().earliest_ms
        self._lanes: dict[ShardId, dict[str, Lane]] = {}
        self._due: dict[tuple[ShardId, str], DueSample] = {}

    def lanes(self, shard: ShardId, loop: ShardLoop) -> dict[str, Lane]:
        found = self._lanes.get(shard)
        if found is None:
            found = {}
            for _, raw in loop.store.scan_prefix(keys.LANE):
                lane = decode_value(raw, Lane)
                found[lane.name] = lane
            self._lanes[shard] = found
        return found

    def due(self, shard: ShardId, loop: ShardLoop, lane: str) -> DueSample:
        found = self._due.get((shard, lane))
        if found is None:
            found = self._due[shard, lane] = due_sample(loop, lane, self.earliest_ms)
        return found


# shard states that are not a healthy engine's (STARTING and RECOVERING pass on their own)
UNHEALTHY_SHARD_STATES = frozenset({ShardState.FAILED, ShardState.DEGRADED, ShardState.FENCED,
                                    ShardState.STOPPED})
UNHEALTHY_WORKER_STATES = frozenset({"FAILED", "BACKOFF"})


def trusted_time_view(clock: TrustedClock) -> TrustedTimeView:
    """Trusted UTC now, and why decisions may not be made (chrony) or are late (a step of
    the wall clock forwards, held back)."""
    now = clock.now()
    return TrustedTimeView(earliest=format_time_ms(now.earliest_ms),
                           latest=format_time_ms(now.latest_ms),
                           uncertainty_ms=now.uncertainty_ms, held_back_ms=clock.held_back_ms,
                           problem=clock.problem() or clock.held_back())


def health_problems(shards: list[ShardView], workers: list[WorkerView],
                    trusted: TrustedTimeView | None = None) -> list[str]:
    """One line per shard or worker that is not healthy, with its reason, and Trusted
    UTC's problem if it has one."""
    problems = [] if trusted is None or trusted.problem is None else [
        f"Trusted UTC: {trusted.problem}"]
    problems += [f"shard {s.shard} is {s.state}: {s.error or 'no reason recorded'}"
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

def shard_views(engine: Engine, reads: StatusReads | None = None) -> list[ShardView]:
    """Every shard of this engine: its loop, its log position, its UNCERTAIN messages (the
    lanes' counters) and its due backlog over the configured lanes (capped seeks)."""
    reads = reads or StatusReads(engine)
    out = []
    loops = sorted(engine.shards.items())
    heads = engine.log_heads.read((shard, loop.log) for shard, loop in loops)  # bounded
    for shard, loop in loops:
        status = loop.status()
        applied = status.applied_position
        end, log_error = heads[shard].end, heads[shard].error
        lanes = reads.lanes(shard, loop)
        due = [reads.due(shard, loop, name) for name in sorted(engine.publishers)]
        out.append(ShardView(
            shard=str(shard), state=status.state.value, epoch=status.epoch,
            applied_position=applied, log_end_position=end,
            lag=None if end is None else _lag(loop, end, applied),
            caught_up=end is not None and (applied + 1 if applied is not None else 0) >= end,
            claims=status.claims, in_flight=status.in_flight, admissions=status.admissions,
            # an UNKNOWN attempt is exactly an UNCERTAIN message (apply moves both at once)
            uncertain=sum(lane.counts.get("UNCERTAIN", 0) for lane in lanes.values()),
            error=status.error or log_error, waiting=status.waiting,
            due_backlog=sum(len(sample.action_ats) for sample in due),
            due_backlog_capped=any(sample.capped for sample in due)))
    refused = [(shard, why) for shard, why in sorted(engine.refused.items())
               if shard not in engine.shards]
    if refused:  # granted, could not be opened: FAILED with the reason, among the others
        out += [refused_view(shard, why) for shard, why in refused]
        out.sort(key=lambda view: ShardId.parse(view.shard))
    return out


def refused_view(shard: ShardId, refused: RefusedShard) -> ShardView:
    """A shard this engine holds but could not open (``Engine.refused``)."""
    return ShardView(shard=str(shard), state=ShardState.FAILED.value, epoch=refused.epoch,
                     applied_position=None, log_end_position=None, lag=None,
                     caught_up=False, claims=0, in_flight=0, admissions=0, uncertain=0,
                     error=refused.error, waiting=None, due_backlog=0)

def lane_views(engine: Engine, reads: StatusReads | None = None) -> list[LaneView]:
    """Every configured lane, then every lane that has messages but no configuration
    (readiness UNCONFIGURED: its messages are never published until it is configured)."""
    reads = reads or StatusReads(engine)
    loops = sorted(engine.shards.items())
    replicated: dict[str, dict[ShardId, Lane]] = {}
    for shard, loop in loops:
        for lane in reads.lanes(shard, loop).values():
            replicated.setdefault(lane.name, {})[shard] = lane
    names = sorted(engine.publishers) + sorted(
        name for name, by_shard in replicated.items()
        if name not in engine.publishers and any(_unfinished(lane)
                                                      for lane in by_shard.values()))
    return [_lane_view(engine, reads, loops, name, replicated.get(name, {})) for name in names]


def _lane_view(engine: Engine, reads: StatusReads, loops: list[tuple[ShardId, ShardLoop]],
               name: str, replicated: dict[ShardId, Lane]) -> LaneView:
    """One lane summed over this engine's shards (``replicated``: its state on each)."""
    publisher = engine.publishers.get(name)
    gates: set[str] = set()
    open_attempts_count = admissions = 0
    counts: dict[str, int] = {}
    per_shard: list[LaneShardView] = []
    samples: list[DueSample] = []
    waiting: dict[str, int] = {}
    for shard, loop in loops:
        lane = replicated.get(shard) or Lane(name=name)
        gates.add(lane.gate.value)
        sample = reads.due(shard, loop, name)
        samples.append(sample)
        _count_waiting(waiting, lane, len(sample.action_ats), loop.due_waiting(name))
        open_attempts_count += lane.open_attempts
        admissions += lane.admissions
        for state, n in lane.counts.items():
            counts[state] = counts.get(state, 0) + n
        per_shard.append(LaneShardView(shard=str(shard), gate=lane.gate.value,
                                       due_backlog=len(sample.action_ats),
                                       open_attempts=lane.open_attempts,
                                       admissions=lane.admissions,
                                       due_backlog_capped=sample.capped))
    lag_p99, lag_max = due_lag_ms(samples, reads.earliest_ms)
    readiness, why = _readiness(engine, name)
    uncertain = counts.get("UNCERTAIN", 0)  # an UNKNOWN attempt is an UNCERTAIN message
    oldest = oldest_unknown_ms([loop.store for _, loop in loops], name) if uncertain else None
    settings = engine.config.lanes.get(name)
    return LaneView(
        lane=name,
        destination=None if publisher is None else engine.config.lanes[name].destination,
        gate="CLOSED" if "CLOSED" in gates else "OPEN", readiness=readiness,
        not_ready_reason=why, due_backlog=sum(len(s.action_ats) for s in samples),
        in_flight=engine.permits.in_flight(name), open_attempts=open_attempts_count,
        published=counts.get("PUBLISHED", 0),
        published_since_start=0 if publisher is None else publisher.published,
        failures=0 if publisher is None else publisher.failures,
        messages_by_state=counts, admissions=admissions, due_lag_p99_ms=lag_p99,
        due_lag_max_ms=lag_max, shards=per_shard,
        due_backlog_capped=any(s.capped for s in samples), waiting_by_reason=waiting,
        uncertain=uncertain, fencing=None if settings is None else settings.fencing_kind,
        uncertain_oldest_age_ms=None if oldest is None else
        max(reads.earliest_ms - oldest, 0))


UNKNOWN_READ: Final = 10_000  # open obligations read per shard for the oldest UNKNOWN age


def oldest_unknown_ms(stores: Iterable[ShardStore], lane: str) -> int | None:
    """The earliest admission (broker ms) of ``lane``'s UNKNOWN attempts, among the first
    ``UNKNOWN_READ`` open obligations of each shard (None: none found)."""
    oldest: int | None = None
    for store in stores:
        for attempt in islice(open_attempts(store, state="UNKNOWN"), UNKNOWN_READ):
            if attempt.lane == lane and (oldest is None or attempt.admitted_broker_ms < oldest):
                oldest = attempt.admitted_broker_ms
    return oldest


def _readiness(engine: Engine, name: str) -> tuple[str, str | None]:
    """(READY, NOT_READY or UNCONFIGURED; why not) of a lane on this engine."""
    publisher = engine.publishers.get(name)
    if publisher is None:
        return "UNCONFIGURED", (f"no [lanes.{name}] in {engine.config.source}: its messages "
                                "wait until the lane is configured")
    return ("READY" if publisher.ready else "NOT_READY"), publisher.not_ready_reason


def _count_waiting(into: dict[str, int], lane: Lane, due: int, reason: str | None) -> None:
    """Add one shard's unfinished messages of ``lane`` to ``into`` by why they wait (the
    due count may be the capped read: then "not due" is an upper bound)."""
    scheduled = lane.counts.get("SCHEDULED", 0)
    for why, n in (("not due", max(scheduled - due, 0)), (reason or "claimable", due),
                   ("PUBLISHING", lane.counts.get("PUBLISHING", 0)),
                   ("UNCERTAIN", lane.counts.get("UNCERTAIN", 0))):
        if n:
            into[why] = into.get(why, 0) + n
