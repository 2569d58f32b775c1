"""The workload: a seeded, reproducible plan of client operations.

``plan(spec)`` is a pure function of its ``WorkloadSpec``: the same seed, op count and
duration give the same list of ``Planned`` operations, each with the time (ms after the
run's start) it is invoked at and every value it carries, so a failing run is replayed
from its seed. What it draws:

* schedules over many lanes, and over ORDERED lanes with few keys (so one key holds several
  messages pending at once), some due at once, some with an expireAt close behind the
  deliverAt (expiry racing admission); payloads of every size — empty, small, just at and
  just above the shard's inline limit (above it the object-store path: PAYLOAD_RESERVE,
  upload, PAYLOAD_COMMIT, SCHEDULE with a ``payload_ref``), and a few large ones;
* cancels and reschedules of earlier schedules, timed to race their due time;
* retries of an earlier command: the same prepared command (same command id, same bytes)
  submitted again;
* operator mutations through the Shard Log: lane close and open again, shard pause and
  resume, attempt resolve (of whatever attempt is UNKNOWN when it runs);
* queries of a message with and without the query barrier, some right after the schedule
  they read (on the same thread, with the barrier: read-your-writes), most often on the
  ORDERED lanes, whose keyed messages live on their key's shard.

Operations are executed by ``tests.chaos.client``; the plan itself does no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import msgspec

from tests.chaos.history import OpKind

OPERATOR_KINDS = frozenset({"lane_close", "lane_open", "shard_pause", "shard_resume",
                            "attempt_resolve", "query", "query_barrier"})


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What to draw. ``lanes``: plain lanes; ``ordered_lanes``: ORDERED ones, each with
    ``keys_per_ordered_lane`` keys. ``inline_limit``: the home's ``[shard]
    max_inline_payload_bytes`` (payload sizes are drawn around it). ``operator``: draw
    operator mutations; ``gated_lanes``: the lanes they may close (never a lane the lane
    isolation invariant holds to a bound)."""

    seed: int
    ops: int
    duration_s: float
    lanes: tuple[str, ...]
    ordered_lanes: tuple[str, ...] = ()
    shards: tuple[str, ...] = ("default/0", "default/1")
    keys_per_ordered_lane: int = 3
    inline_limit: int = 1024
    large_payloads: bool = True
    operator: bool = True
    gated_lanes: tuple[str, ...] = ()
    lead_ms: tuple[int, int] = (300, 3_000)  # deliverAt this long after the schedule
    expiring: float = 0.15  # the share of schedules with an expireAt soon after deliverAt


class Planned(msgspec.Struct, frozen=True, kw_only=True):
    """One planned operation. ``ref`` names it; a cancel, reschedule or retry names the
    schedule it acts on by ``of`` (a retry: the exact command of op ``of``)."""

    ref: str
    at_ms: int  # invoked this long after the run's start
    kind: OpKind
    message_id: str | None = None
    lane: str | None = None
    key: str | None = None
    deliver_offset_ms: int | None = None  # deliverAt, ms after the run's start
    expire_offset_ms: int | None = None
    payload_bytes: int = 0
    wait: bool = False
    of: str | None = None
    target: str | None = None  # lane or shard of an operator mutation
    follows: bool = False  # a query run on the command thread right after the op it reads


def plan(spec: WorkloadSpec) -> list[Planned]:
    """The operations of ``spec``, in the order they are invoked."""
    rng = random.Random(spec.seed)
    span_ms = max(int(spec.duration_s * 1000), 1)
    planned: list[Planned] = []
    schedules: list[Planned] = []
    commands: list[Planned] = []
    count = 0
    while count < spec.ops:
        at = rng.randrange(span_ms)
        roll = rng.random()
        made: list[Planned]
        if roll < 0.55 or not schedules:
            made = [_schedule(rng, spec, len(planned), at)]
            schedules += made
            if rng.random() < (0.6 if made[0].lane in spec.ordered_lanes else 0.15):
                made.append(_query(rng, len(planned) + 1, made[0], follows=True))
        elif roll < 0.63:
            made = [_race(rng, "cancel", len(planned), rng.choice(schedules))]
        elif roll < 0.71:
            made = [_race(rng, "reschedule", len(planned), rng.choice(schedules))]
        elif roll < 0.79:
            earlier = rng.choice(commands or schedules)
            made = [msgspec.structs.replace(earlier, ref=f"r{len(planned)}", kind="retry",
                                            at_ms=max(at, earlier.at_ms + rng.randrange(
                                                50, 1_500)), of=earlier.ref,
                                            wait=rng.random() < 0.5)]
        elif roll < 0.93 or not spec.operator:
            made = [_query(rng, len(planned), rng.choice(schedules))]
        else:
            made = _operator(rng, spec, len(planned), at)
        planned += made
        commands += [m for m in made if m.kind in ("schedule", "cancel", "reschedule")]
        count += len(made)
    return sorted(planned, key=lambda p: (p.at_ms, p.ref))


def _payload_size(rng: random.Random, spec: WorkloadSpec) -> int:
    limit = spec.inline_limit
    buckets = [0, rng.randrange(1, 64), rng.randrange(64, max(limit, 65)), limit]
    if spec.large_payloads:
        buckets += [limit + 1, rng.randrange(limit + 1, limit * 4 + 2)]
    size = rng.choice(buckets)
    if spec.large_payloads and rng.random() < 0.03:
        size = 256 * 1024  # a large one now and then
    return size


def _schedule(rng: random.Random, spec: WorkloadSpec, n: int, at: int) -> Planned:
    ordered = bool(spec.ordered_lanes) and rng.random() < 0.35
    if ordered:
        lane = rng.choice(spec.ordered_lanes)
        key: str | None = f"key-{rng.randrange(spec.keys_per_ordered_lane)}"
    else:
        lane = rng.choice(spec.lanes)
        key = f"k{rng.randrange(1000)}" if rng.random() < 0.3 else None
    low, high = spec.lead_ms
    lead = -rng.randrange(0, 500) if rng.random() < 0.1 else rng.randrange(low, high)
    deliver = at + lead
    expire = deliver + rng.randrange(0, 1_500) if rng.random() < spec.expiring else None
    return Planned(ref=f"s{n}", at_ms=at, kind="schedule", message_id=f"m{spec.seed}-{n}",
                   lane=lane, key=key, deliver_offset_ms=deliver, expire_offset_ms=expire,
                   payload_bytes=_payload_size(rng, spec), wait=rng.random() < 0.4)


def _race(rng: random.Random, kind: OpKind, n: int, target: Planned) -> Planned:
    """A cancel or reschedule of ``target`` invoked around its due time."""
    assert target.deliver_offset_ms is not None
    at = max(target.at_ms + 1, target.deliver_offset_ms + rng.randrange(-400, 300))
    deliver = None
    if kind == "reschedule":
        deliver = at + rng.randrange(-200, 2_000)
    return Planned(ref=f"{kind[0]}{n}", at_ms=at, kind=kind, message_id=target.message_id,
                   lane=target.lane, key=target.key, deliver_offset_ms=deliver,
                   of=target.ref, wait=rng.random() < 0.4)


def _query(rng: random.Random, n: int, target: Planned, *,
           follows: bool = False) -> Planned:
    """A query of ``target``'s message some time after it, or (``follows``) right after it
    on the same thread, with the query barrier: a read racing the write it must see."""
    at = target.at_ms + (1 if follows else rng.randrange(0, 3_000))
    kind: OpKind = "query_barrier" if follows or rng.random() < 0.4 else "query"
    return Planned(ref=f"q{n}", at_ms=at, kind=kind, message_id=target.message_id,
                   of=target.ref, follows=follows)


def _operator(rng: random.Random, spec: WorkloadSpec, n: int, at: int) -> list[Planned]:
    """A lane closed then opened, a shard paused then resumed, or an attempt resolve."""
    roll = rng.random()
    hold = rng.randrange(300, 2_000)
    if roll < 0.45 and spec.gated_lanes:
        lane = rng.choice(spec.gated_lanes)
        return [Planned(ref=f"o{n}", at_ms=at, kind="lane_close", target=lane),
                Planned(ref=f"o{n}b", at_ms=at + hold, kind="lane_open", target=lane)]
    if roll < 0.7:
        shard = rng.choice(spec.shards)
        return [Planned(ref=f"o{n}", at_ms=at, kind="shard_pause", target=shard),
                Planned(ref=f"o{n}b", at_ms=at + hold, kind="shard_resume", target=shard)]
    return [Planned(ref=f"o{n}", at_ms=at, kind="attempt_resolve")]


def payload_for(ref: str, size: int) -> bytes:
    """The payload bytes of op ``ref``: deterministic, text, and unlike any other op's."""
    unit = f"{ref}:".encode()
    return (unit * (size // len(unit) + 1))[:size]
