"""What the admin socket answers: read models over the engine's live shards, command
submission (append + optional wait for the applied result), and status snapshots.

Reads of RocksDB here run on admin threads beside the shard loops; RocksDB reads are
thread-safe and never block the loops' writes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from typing import Any

import msgspec

from nereus.adapters.checkpoint_take import CheckpointTaken, taken_view
from nereus.adapters.command_lookup import CommandStatus
from nereus.engine.admin import params
from nereus.engine.admin.documents import (
    EngineStatus,
    LaneShardView,
    LaneView,
    ShardView,
    TrustedTimeView,
    WorkerView,
)
from nereus.engine.engine import Engine
from nereus.engine.shard_loop import ShardLoop
from nereus.engine.shard_status import ShardState
from nereus.errors import NotFound, UsageError
from nereus.machine import dedup_key
from nereus.records import QueryBarrier, decode, encode
from nereus.records.codec import DecodeFailure
from nereus.shard import ShardId, partition_for
from nereus.state import keys
from nereus.state.values import Lane, Result, decode_value
from nereus.timespec import format_time_ms
from nereus.views import (
    MessageDetail,
    MessageView,
    attempt_view,
    due_backlog,
    find_message,
    iter_messages,
    message_detail,
    message_view,
    open_attempts,
)


def _unfinished(lane: Lane) -> bool:
    """The lane holds messages that are not finished (scheduled or admitted)."""
    return any(lane.counts.get(state, 0) for state in ("SCHEDULED", "PUBLISHING", "UNCERTAIN"))


def result_view(result: Result) -> dict[str, Any]:
    return {
        "result": result.status.value,
        "reason": result.reason,
        "detail": result.detail,
        "kind": result.kind,
        "position": result.position,
        "delay_message_id": result.delay_message_id,
        "generation": result.generation,
        "attempt_id": result.attempt_id,
    }


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


class AdminApi:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # helpers --------------------------------------------------------------------------
    def _loop(self, shard_text: str) -> ShardLoop:
        shard = ShardId.parse(shard_text)
        loop = self.engine.shards.get(shard)
        if loop is None:
            raise NotFound(f"shard {shard} is not owned by this engine")
        return loop

    def _loop_for_message(self, delay_message_id: str, route: str) -> ShardLoop:
        """The loop of the shard that holds the message: its id's shard, unless an ORDERED
        lane placed it by key elsewhere (every shard of the route is then searched)."""
        settings = self.engine.config.route(route)
        shard = ShardId(route, partition_for(delay_message_id, settings.partitions))
        home = self.engine.shards[shard]
        if find_message(home.store, delay_message_id) is not None:
            return home
        for other, loop in sorted(self.engine.shards.items()):
            if other.route == route and other != shard and \
                    find_message(loop.store, delay_message_id) is not None:
                return loop
        return home

    # status ---------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        assert self.engine.clock is not None
        now = self.engine.clock.now()
        shards = self.shards()
        workers = self.workers()
        problems = health_problems(shards, workers)
        return EngineStatus(
            running=True, healthy=not problems, problems=problems,
            owner_id=self.engine.owner_id, home=str(self.engine.home),
            started_at=format_time_ms(self.engine.started_ms),
            trusted_time=TrustedTimeView(earliest=format_time_ms(now.earliest_ms),
                                         latest=format_time_ms(now.latest_ms),
                                         uncertainty_ms=now.uncertainty_ms),
            shards=shards, lanes=self.lanes(), workers=workers)

    def workers(self) -> list[WorkerView]:
        """Every supervised worker thread: its state, restarts and last error."""
        return [WorkerView(name=worker.name, kind=worker.kind, state=worker.state.value,
                           restarts=worker.restarts, last_error=worker.last_error,
                           last_error_at=None if worker.last_error_at_ms is None
                           else format_time_ms(worker.last_error_at_ms))
                for worker in self.engine.workers()]

    def shards(self) -> list[ShardView]:
        assert self.engine.clock is not None
        now = self.engine.clock.now()
        out = []
        for shard, loop in sorted(self.engine.shards.items()):
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
                                for name in self.engine.publishers)))
        return out

    def lanes(self) -> list[LaneView]:
        """Every configured lane, then every lane that has messages but no configuration
        (readiness UNCONFIGURED: its messages are never published until it is configured)."""
        assert self.engine.clock is not None
        now = self.engine.clock.now()
        loops = sorted(self.engine.shards.items())
        replicated: dict[str, dict[ShardId, Lane]] = {}
        for shard, loop in loops:
            for _, raw in loop.store.scan_prefix(keys.LANE):
                lane = decode_value(raw, Lane)
                replicated.setdefault(lane.name, {})[shard] = lane
        names = sorted(self.engine.publishers) + sorted(
            name for name, by_shard in replicated.items()
            if name not in self.engine.publishers and any(_unfinished(lane)
                                                          for lane in by_shard.values()))
        out = []
        for name in names:
            publisher = self.engine.publishers.get(name)
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
            lag_p99, lag_max = due_lag_ms(self.engine.shards.values(), name, now.earliest_ms,
                                          backlog)
            why: str | None
            if publisher is None:
                readiness, why = "UNCONFIGURED", (
                    f"no [lanes.{name}] in {self.engine.config.source}: its messages wait "
                    "until the lane is configured")
            else:
                readiness = "READY" if publisher.ready else "NOT_READY"
                why = publisher.not_ready_reason
            out.append(LaneView(
                lane=name,
                destination=None if publisher is None
                else self.engine.config.lanes[name].destination,
                gate="CLOSED" if "CLOSED" in gates else "OPEN", readiness=readiness,
                not_ready_reason=why, due_backlog=backlog,
                in_flight=self.engine.permits.in_flight(name),
                open_attempts=open_attempts_count,
                published=0 if publisher is None else publisher.published,
                failures=0 if publisher is None else publisher.failures,
                messages_by_state=counts, admissions=admissions, due_lag_p99_ms=lag_p99,
                due_lag_max_ms=lag_max, shards=per_shard))
        return out

    # messages and attempts ------------------------------------------------------------
    def message(self, delay_message_id: str, *, route: str = "default",
                barrier: bool = False) -> MessageDetail:
        loop = self._loop_for_message(delay_message_id, route)
        barrier_position = None
        if barrier:
            data = encode(QueryBarrier(command_id=f"barrier-{self.engine.new_id()}"))
            (receipt,) = loop.log.append([data])
            loop.wake()
            if not loop.wait_applied(receipt.position, 30):
                raise UsageError(f"the query barrier at {receipt.position} was not applied in 30 s")
            barrier_position = receipt.position
        message = find_message(loop.store, delay_message_id)
        end = loop.log.end_position()
        applied = loop.applied_position
        if message is None:
            raise NotFound(f"no message {delay_message_id} on shard {loop.shard} (applied up to "
                           f"position {applied}, log end {end})")
        return message_detail(loop.store, message, str(loop.shard), applied_position=applied,
                              log_end_position=end, barrier_position=barrier_position)

    def messages(self, *, shard: str | None, state: str | None, lane: str | None,
                 limit: int) -> list[MessageView]:
        loops = [self._loop(shard)] if shard else [
            loop for _, loop in sorted(self.engine.shards.items())]
        out: list[MessageView] = []
        for loop in loops:
            for message in iter_messages(loop.store, state=state, lane=lane):
                out.append(message_view(message, str(loop.shard)))
                if len(out) >= limit:
                    return out
        return out

    def attempts(self, *, shard: str | None, state: str | None) -> list[dict[str, Any]]:
        wanted = {"publishing": "PUBLISHING", "unknown": "UNKNOWN"}.get(
            (state or "").lower(), state)
        loops = [self._loop(shard)] if shard else [
            loop for _, loop in sorted(self.engine.shards.items())]
        out = []
        for loop in loops:
            for attempt in open_attempts(loop.store, state=wanted):
                view: dict[str, Any] = msgspec.to_builtins(attempt_view(attempt))
                view["shard"] = str(loop.shard)
                recovery = self.engine.evidence
                view["evidence_search"] = (recovery.search_view(attempt.attempt_id)
                                           if recovery is not None else None)
                out.append(view)
        return out

    def command(self, command_id: str) -> CommandStatus:
        """Where a command stands: APPLIED with its result on some shard, QUEUED in a
        shard's log past the applied position, or NotFound."""
        from nereus.adapters.command_lookup import applied_result, command_view, queued_position

        loops = sorted(self.engine.shards.items())
        for shard, loop in loops:
            result = applied_result(loop.store, command_id)
            if result is not None:
                return command_view(command_id, str(shard), result, None)
        for shard, loop in loops:
            applied = loop.applied_position
            queued = queued_position(loop.log, 0 if applied is None else applied + 1,
                                     command_id)
            if queued is not None:
                return command_view(command_id, str(shard), None, queued)
        raise NotFound(f"no command {command_id} on any shard of this engine: neither applied "
                       "nor queued", hint="check the id (a receipt's command_id, or an "
                       "operator mutation's idempotency_key)")

    # checkpoints ----------------------------------------------------------------------
    def checkpoint(self, body: Mapping[str, object]) -> CheckpointTaken:
        """Take a checkpoint of one shard now; answers once it is catalogued."""
        loop = self._loop(str(body.get("shard", "")))
        timeout_s = params.number(body.get("timeout_s"), "timeout_s", low=1, high=86_400,
                                  default=3600)
        taken = loop.request_checkpoint().result(timeout=timeout_s)
        objects = self.engine.checkpointer.objects if self.engine.checkpointer else None
        assert objects is not None
        return taken_view(taken, objects)

    # operator mutations ---------------------------------------------------------------
    def plan_mutation(self, body: dict[str, Any]) -> dict[str, Any]:
        """Plan one operator mutation against the live shard: precondition, dry run, impact.

        Writes nothing; the CLI appends the planned record through ``submit`` afterwards.
        """
        from nereus.operator import plan_mutation
        from nereus.operator.plan import plan_document
        from nereus.records.codec import OPERATOR_MUTATIONS

        loop = self._loop(str(body.get("shard", "")))
        try:
            record = decode(base64.b64decode(str(body["data"]), validate=True))
            before = [base64.b64decode(str(item), validate=True)
                      for item in body.get("before") or []]
        except (KeyError, ValueError) as exc:
            raise UsageError(f"body needs data: an operator mutation in base64 ({exc})") from None
        if not isinstance(record, OPERATOR_MUTATIONS):
            what = record.detail if isinstance(record, DecodeFailure) else type(record).__name__
            raise UsageError(f"data is not an operator mutation: {what}")
        assert self.engine.clock is not None
        plan = plan_mutation(loop.store, record, shard=str(loop.shard),
                             broker_ms=self.engine.clock.now().latest_ms,
                             limits=loop.runner.limits, before=before)
        return {"shard": str(loop.shard), **plan_document(plan)}

    # commands -------------------------------------------------------------------------
    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Append records (base64, grouped per shard) and optionally wait for results."""
        items = body.get("records")
        if not isinstance(items, list) or not items:
            raise UsageError("body needs records: [{shard, data}] with data in base64")
        wait_ms = params.integer(body.get("wait_ms"), "wait_ms", low=0, high=600_000, default=0)
        grouped: dict[ShardLoop, list[tuple[int, bytes]]] = {}
        for index, item in enumerate(items):
            try:
                loop = self._loop(str(item["shard"]))
                data = base64.b64decode(item["data"], validate=True)
            except (KeyError, TypeError, ValueError) as exc:
                raise UsageError(f"records[{index}]: {exc}") from None
            grouped.setdefault(loop, []).append((index, data))
        receipts: list[dict[str, Any]] = [{} for _ in items]
        waits: list[tuple[ShardLoop, int, bytes, int]] = []
        with ExitStack() as watching:
            if wait_ms > 0:  # the loops keep what they apply from before the appends on
                for loop in grouped:
                    watching.enter_context(loop.watching())
            for loop, entries in grouped.items():
                got = loop.log.append([data for _, data in entries])
                if wait_ms > 0:
                    loop.expect([receipt.position for receipt in got])
                loop.wake()
                for (index, data), receipt in zip(entries, got, strict=True):
                    receipts[index] = {"shard": str(loop.shard),
                                       "source_position": receipt.position,
                                       "broker_time": format_time_ms(receipt.broker_ms),
                                       "evidence": "QUEUED"}
                    waits.append((loop, receipt.position, data, index))
            if wait_ms > 0:
                assert self.engine.clock is not None
                deadline = self.engine.clock.source.monotonic() + wait_ms / 1000
                for loop, position, data, index in waits:
                    receipts[index].update(self._awaited_result(loop, position, data,
                                                                deadline))
        return {"receipts": receipts}

    def _awaited_result(self, loop: ShardLoop, position: int, data: bytes,
                        deadline: float) -> dict[str, Any]:
        """The applied result at ``position`` as the loop applied it; read from the store
        only when it was applied before the wait began; nothing when the wait runs out."""
        result = loop.await_result(position, deadline)
        if result is None:
            if loop.applied_position is None or loop.applied_position < position:
                return {}
            result = self.result_at(loop, position, data)
        view = result_view(result)
        view["duplicate_of"] = None if result.position == position else result.position
        view["record_sha256"] = hashlib.sha256(data).hexdigest()
        view["evidence"] = "APPLIED"
        return view

    @staticmethod
    def result_at(loop: ShardLoop, position: int, data: bytes) -> Result:
        """The stored result the record at ``position`` left (its own rejection, or its
        dedup key's first result)."""
        rejected = loop.store.get(keys.reject_key(position))
        if rejected is not None:
            return decode_value(rejected, Result)
        record = decode(data)
        if isinstance(record, DecodeFailure):  # pragma: no cover - stored under reject
            raise UsageError(f"record at {position} is not decodable: {record.detail}")
        key = dedup_key(record)
        raw = loop.store.get(keys.result_key(key)) if key else None
        if raw is None:
            raise NotFound(f"no result for position {position}")
        return decode_value(raw, Result)
