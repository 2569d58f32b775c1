"""Hand-made histories for the checker's own tests: a ``Story`` says what happened (a
schedule, an admission, an outcome, a consumer's read) and writes the history lines a real
run would have left, so a test can break exactly one rule and expect it named."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tests.chaos.history import (
    Digest,
    Entry,
    Fault,
    FinalAttempt,
    FinalMessage,
    FinalResult,
    LaneInfo,
    Line,
    LogEntry,
    Op,
    Receipt,
    RunEnded,
    RunStarted,
    Seen,
    lines_of,
)

SHARD = "default/0"
T0 = 1_800_000_000_000


@dataclass
class _Message:
    shard: str
    lane: str
    state: str
    generation: int
    deliver_at_ms: int
    expire_at_ms: int | None
    key: str | None
    created_position: int
    updated_position: int
    schedule_command_id: str
    attempts: dict[str, FinalAttempt] = field(default_factory=dict)


@dataclass
class Story:
    """A run told step by step. Positions are given out per shard from 1 (0 is the route
    identity), in the order the steps are told."""

    lanes: list[LaneInfo] = field(default_factory=lambda: [
        LaneInfo(name="local", destination="file", healthy=True),
        LaneInfo(name="ordered", destination="file", ordered=True)])
    clock_bound_ms: int = 0
    lateness_bound_ms: int = 5_000
    quiesced: bool = True
    ended_ms: int = T0 + 60_000
    entries: list[Entry] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    messages: dict[str, _Message] = field(default_factory=dict)
    results: dict[tuple[str, str], FinalResult] = field(default_factory=dict)
    orders: dict[str, int] = field(default_factory=dict)

    def _append(self, shard: str, kind: str, at_ms: int, **fields: Any) -> LogEntry:
        position = self.positions.get(shard, 0) + 1
        self.positions[shard] = position
        sha = hashlib.sha256(f"{shard}:{position}:{kind}:{fields}".encode()).hexdigest()
        record = LogEntry(shard=shard, position=position, broker_ms=at_ms, kind=kind,
                          sha256=sha, **fields)
        self.entries.append(record)
        return record

    def _result(self, record: LogEntry, status: str, **fields: Any) -> FinalResult:
        assert record.dedup_key is not None
        result = FinalResult(shard=record.shard, dedup_key=record.dedup_key, status=status,
                             kind=record.kind, position=record.position,
                             delay_message_id=record.delay_message_id, **fields)
        self.results.setdefault((record.shard, record.dedup_key), result)
        return result

    # -- client commands -------------------------------------------------------------------
    def schedule(self, mid: str, deliver_at_ms: int, *, lane: str = "local",
                 key: str | None = None, expire_at_ms: int | None = None,
                 shard: str = SHARD, invoke_ms: int | None = None,
                 evidence: str = "QUEUED") -> LogEntry:
        at = invoke_ms if invoke_ms is not None else T0
        command = f"sched-{mid}"
        record = self._append(shard, "SCHEDULE", at, dedup_key=f"c/{command}",
                              command_id=command, delay_message_id=mid, lane=lane,
                              deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
        self._result(record, "APPLIED", generation=1)
        self.messages[mid] = _Message(shard, lane, "SCHEDULED", 1, deliver_at_ms, expire_at_ms,
                                      key, record.position, record.position, command)
        self.op("schedule", mid, command, record, invoke_ms=at, evidence=evidence,
                lane=lane, key=key, deliver_at_ms=deliver_at_ms, expire_at_ms=expire_at_ms)
        return record

    def op(self, kind: Any, mid: str | None, command: str, record: LogEntry, *,
           invoke_ms: int = T0, evidence: str = "QUEUED", **fields: Any) -> Op:
        applied = evidence == "APPLIED"
        result = self.results.get((record.shard, record.dedup_key or ""))
        receipt = Receipt(evidence=evidence, shard=record.shard,
                          source_position=record.position, command_id=command,
                          kind=record.kind,
                          result=result.status if applied and result else None)
        op = Op(index=len([e for e in self.entries if isinstance(e, Op)]), kind=kind,
                invoke_ms=invoke_ms, complete_ms=invoke_ms + 5, ok=True, message_id=mid,
                receipts=[receipt], **fields)
        self.entries.append(op)
        return op

    def cancel(self, mid: str, *, at_ms: int = T0, applied: bool = True) -> LogEntry:
        message = self.messages[mid]
        command = f"cancel-{mid}"
        record = self._append(message.shard, "CANCEL", at_ms, dedup_key=f"c/{command}",
                              command_id=command, delay_message_id=mid)
        self._result(record, "APPLIED" if applied else "REJECTED")
        if applied:
            message.state = "CANCELLED"
        self.op("cancel", mid, command, record, invoke_ms=at_ms)
        return record

    def reschedule(self, mid: str, deliver_at_ms: int, *, at_ms: int = T0) -> LogEntry:
        message = self.messages[mid]
        command = f"resched-{mid}-{message.generation + 1}"
        record = self._append(message.shard, "RESCHEDULE", at_ms, dedup_key=f"c/{command}",
                              command_id=command, delay_message_id=mid,
                              deliver_at_ms=deliver_at_ms)
        message.generation += 1
        message.deliver_at_ms = deliver_at_ms
        self._result(record, "APPLIED", generation=message.generation)
        self.op("reschedule", mid, command, record, invoke_ms=at_ms,
                deliver_at_ms=deliver_at_ms)
        return record

    # -- the engine's records --------------------------------------------------------------
    def admit(self, mid: str, attempt_id: str, *, at_ms: int) -> LogEntry:
        message = self.messages[mid]
        record = self._append(message.shard, "PUBLISH_ADMISSION", at_ms,
                              dedup_key=f"a/{attempt_id}", attempt_id=attempt_id,
                              delay_message_id=mid, generation=message.generation,
                              lane=message.lane)
        self._result(record, "APPLIED", attempt_id=attempt_id)
        message.attempts[attempt_id] = FinalAttempt(
            attempt_id=attempt_id, attempt_no=len(message.attempts) + 1,
            generation=message.generation, state="PUBLISHING",
            admitted_position=record.position, admitted_broker_ms=at_ms,
            disposition="NONE", evidence="", settled_position=None, settled_by=None,
            owner_id="owner-1")
        message.state = "PUBLISHING"
        message.updated_position = record.position
        return record

    def settle(self, mid: str, attempt_id: str, outcome: str, *, at_ms: int,
               disposition: str = "NONE", message_state: str | None = None) -> LogEntry:
        message = self.messages[mid]
        record = self._append(message.shard, "PUBLISH_OUTCOME", at_ms,
                              dedup_key=f"o/out-{attempt_id}-{outcome}",
                              attempt_id=attempt_id, delay_message_id=mid, outcome=outcome,
                              disposition=disposition)
        self._result(record, "APPLIED", attempt_id=attempt_id)
        attempt = message.attempts[attempt_id]
        message.attempts[attempt_id] = msgspec.structs.replace(
            attempt, state=outcome, disposition=disposition,
            evidence="outbox@0" if outcome == "PUBLISHED" else "",
            settled_position=None if outcome == "UNKNOWN" else record.position,
            settled_by=None if outcome == "UNKNOWN" else "OUTCOME")
        message.state = message_state or {"PUBLISHED": "PUBLISHED", "UNKNOWN": "UNCERTAIN",
                                          "NOT_PUBLISHED": "SCHEDULED"}[outcome]
        message.updated_position = record.position
        return record

    def end_as(self, mid: str, state: str) -> None:
        self.messages[mid].state = state

    def publish(self, mid: str, attempt_id: str, *, at_ms: int,
                received_ms: int | None = None) -> Seen:
        """Admitted, PUBLISHED, and read by the consumer ``received_ms`` (default: 5 ms
        after ``at_ms``)."""
        self.admit(mid, attempt_id, at_ms=at_ms)
        self.settle(mid, attempt_id, "PUBLISHED", at_ms=at_ms + 2)
        return self.see(mid, attempt_id, received_ms=received_ms or at_ms + 5)

    # -- consumers, faults, digests --------------------------------------------------------
    def see(self, mid: str, attempt_id: str, *, received_ms: int,
            durable: bool = True) -> Seen:
        message = self.messages[mid]
        stream = f"file:{message.lane}"
        order = self.orders.get(stream, 0)
        self.orders[stream] = order + 1
        generation = message.attempts[attempt_id].generation \
            if attempt_id in message.attempts else message.generation
        seen = Seen(lane=message.lane, stream=stream, order=order, where=f"outbox@{order}",
                    delay_message_id=mid, attempt_id=attempt_id, received_ms=received_ms,
                    generation=generation, key=message.key,
                    deliver_at_ms=message.deliver_at_ms, durable=durable)
        self.entries.append(seen)
        return seen

    def fault(self, nemesis: str, start_ms: int, heal_ms: int, *,
              engine_wide: bool = True, lanes: list[str] | None = None) -> None:
        for phase, at in (("start", start_ms), ("heal", heal_ms)):
            self.entries.append(Fault(nemesis=nemesis, phase=phase,  # type: ignore[arg-type]
                                      at_ms=at, engine_wide=engine_wide, lanes=lanes or []))

    def digest(self, source: str, digest: str, *, shard: str = SHARD,
               position: int | None = None, error: str | None = None) -> None:
        self.entries.append(Digest(shard=shard, source=source, digest=digest,
                                   applied_position=position if position is not None
                                   else self.positions.get(shard, 0), error=error))

    # -- the history -----------------------------------------------------------------------
    def entries_out(self) -> list[Entry]:
        started = RunStarted(seed=1, backend="file", nemeses=["story"], ops=0, duration_s=1.0,
                             lanes=self.lanes, shards=[SHARD], clock_bound_ms=self.clock_bound_ms,
                             lateness_bound_ms=self.lateness_bound_ms, started_ms=T0)
        finals: list[Entry] = [
            FinalMessage(shard=m.shard, delay_message_id=mid, lane=m.lane, state=m.state,
                         generation=m.generation, deliver_at_ms=m.deliver_at_ms,
                         action_at_ms=m.deliver_at_ms, expire_at_ms=m.expire_at_ms, key=m.key,
                         created_position=m.created_position,
                         updated_position=m.updated_position,
                         schedule_command_id=m.schedule_command_id, detail=None,
                         attempts=sorted(m.attempts.values(), key=lambda a: a.attempt_no))
            for mid, m in self.messages.items()]
        ended = RunEnded(ended_ms=self.ended_ms, quiesced=self.quiesced)
        return [started, *self.entries, *finals, *self.results.values(), ended]

    def lines(self) -> list[Line]:
        return lines_of(self.entries_out())
