"""The checker: one pure function per invariant over a run's history (``history.py``).

Each function takes the parsed history (``Facts``) and returns its violations; each
violation names the invariant, the ids involved, says what is wrong, and quotes the
history lines that prove it. ``check`` runs them all. Nothing here reads a clock, a file
or a shard: the same history always gives the same verdict, so a failed run is re-checked
offline (``python -m tests.chaos.checker HISTORY.jsonl``).

The invariants (seed 000 and issue 37 §1):

``acknowledged_commands_applied``
    Every command the client holds a receipt for (QUEUED or APPLIED) is in the Shard Log at
    the receipt's position with that command id, and the shard applied it exactly once,
    at its first position in the log (source order): the shard's one result for its dedup
    key names that position; an APPLIED receipt says what that result says; a SCHEDULE's
    message was created by that application.
``never_early``
    No consumer reads a record before the deliverAt of the generation its attempt
    published, by the consumer's own clock, less ``RunStarted.clock_bound_ms`` (0 unless a
    nemesis moved the engine's clock where the Shard Log cannot detect it).
``cancel_before_admission``
    A CANCEL the shard APPLIED (it wins only before any Publish Admission) means the
    message was never published: no consumer saw any of its attempts, and no admission of
    it won after the cancel.
``one_publish_per_attempt``
    A consumer sees each attempt at most once; every attempt it sees was admitted (a
    durable PUBLISHING before the Producer call); a message reaches the destination by a
    second attempt only if the first was UNKNOWN or NOT_PUBLISHED when the second was
    admitted (never after a proven PUBLISHED, never beside a PUBLISHING one).
``ordered_lanes``
    On an ORDERED lane, for two messages m1, m2 of one key: when m1's deliverAt (of the
    generation that was published, or is open) is before m2's — equal deliverAt: m1's
    defining command (SCHEDULE or RESCHEDULE) is earlier in the Shard Log — and that
    command was applied before m2's winning Publish Admission, then m1 was pending when m2
    was admitted, so m1 must reach the destination before m2 (by the destination's own
    order: an outbox file's lines, a partition's offsets), and m2 may not be admitted while
    an attempt of m1 is still open (UNCERTAIN at the end). Pairs where m1 never reached
    the destination and holds no open attempt (cancelled, expired, failed) are not judged.
``destination_consistency``
    Every message ends consistent with the destination: PUBLISHED ⇒ its publishing attempt
    was seen; a seen attempt is PUBLISHED or UNKNOWN (never NOT_PUBLISHED) and its message
    PUBLISHED or UNCERTAIN; after quiescence an UNCERTAIN message's open attempt is not
    sitting in the destination where the evidence scan looks (then it could have been
    classified).
``admission_not_expired``
    An admission that won before expireAt never leaves its message EXPIRED when the
    attempt never reached the destination (NOT_PUBLISHED LANE_UNAVAILABLE: local
    conditions do not rewrite an on-time Admission; expireAt closes *new* admissions).
``barrier_reads_acknowledged_writes``
    A query with the query barrier (``message show --barrier``: its answer is conclusive)
    invoked after a command on the message was acknowledged sees that command: a
    SCHEDULE the shard APPLIED is found, a RESCHEDULE's generation is reached, a winning
    CANCEL shows CANCELLED.
``operator_mutations_take_effect``
    An operator mutation the workload asked for (``lane close``, ``lane open``, ``shard
    pause``, ``shard resume``; the workload never repeats one on purpose) is applied as a new
    command: it is never answered with the result of an earlier, different request (the
    receipt of an earlier op's position, or ``duplicate_of``), which would report it
    APPLIED while nothing changed.
``lane_isolation``
    On a lane no nemesis touched (``LaneInfo.healthy``), every record is seen within
    ``lateness_bound_ms`` of max(deliverAt, the schedule's invoke time), except messages
    whose wait overlapped an engine-wide fault (a killed or stopped engine, a log outage).
``due_messages_settle``
    After quiescence no message is still SCHEDULED or PUBLISHING although its deliverAt
    passed before the run ended (every wait has an end once faults heal), except a message
    of an ORDERED key whose head is UNCERTAIN (it waits for evidence or an operator).
``engine_starts``
    Every engine start the run asked for answered (every shard ACTIVE) within
    ``START_BOUND_MS``, whatever a lane's destination was doing (a destination that hangs
    when opened may leave its lane NOT READY, never the engine down).
``replay_digests``
    An offline replay of each shard's log from empty, and from every checkpoint, gives the
    live database's digest; so does a replay from empty in a home whose ``[shard]`` limits
    differ (every input of apply is in the log).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from tests.chaos.history import (
    Digest,
    EngineStart,
    Fault,
    FinalAttempt,
    FinalMessage,
    FinalResult,
    Line,
    LogEntry,
    Op,
    Receipt,
    RunEnded,
    RunStarted,
    Seen,
    read_history,
)

CLIENT_KINDS = frozenset({"SCHEDULE", "CANCEL", "RESCHEDULE", "QUERY_BARRIER",
                          "PAYLOAD_RESERVE", "PAYLOAD_COMMIT"})
T = TypeVar("T", bound=msgspec.Struct)
SETTLE_GRACE_MS = 2_000
START_BOUND_MS = 30_000  # a message due this close to the end may still be on its way


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken invariant: which, the ids involved, what is wrong, and the history
    lines (numbers and text) that prove it."""

    invariant: str
    ids: list[str]
    text: str
    lines: list[int]
    quotes: list[str]

    def render(self) -> str:
        quoted = "".join(f"\n    line {n}: {q}" for n, q in zip(self.lines, self.quotes,
                                                               strict=True))
        return f"[{self.invariant}] {self.text} (ids: {', '.join(self.ids)}){quoted}"


@dataclass
class Facts:
    """The history, indexed for the invariants."""

    lines: list[Line]
    run: Line | None = None
    end: Line | None = None
    ops: list[Line] = field(default_factory=list)
    seen: list[Line] = field(default_factory=list)
    faults: list[Line] = field(default_factory=list)
    records: dict[str, list[Line]] = field(default_factory=dict)  # shard -> by position
    messages: dict[str, Line] = field(default_factory=dict)
    results: dict[tuple[str, str], Line] = field(default_factory=dict)
    attempts: dict[str, tuple[FinalAttempt, Line]] = field(default_factory=dict)
    digests: list[Line] = field(default_factory=list)
    starts: list[Line] = field(default_factory=list)

    @classmethod
    def of(cls, lines: Sequence[Line]) -> Facts:
        facts = cls(list(lines))
        by_shard: dict[str, list[Line]] = defaultdict(list)
        for line in lines:
            entry = line.entry
            if isinstance(entry, RunStarted):
                facts.run = line
            elif isinstance(entry, RunEnded):
                facts.end = line
            elif isinstance(entry, Op):
                facts.ops.append(line)
            elif isinstance(entry, Seen):
                facts.seen.append(line)
            elif isinstance(entry, Fault):
                facts.faults.append(line)
            elif isinstance(entry, LogEntry):
                by_shard[entry.shard].append(line)
            elif isinstance(entry, FinalMessage):
                facts.messages[entry.delay_message_id] = line
                for attempt in entry.attempts:
                    facts.attempts[attempt.attempt_id] = (attempt, line)
            elif isinstance(entry, FinalResult):
                facts.results[(entry.shard, entry.dedup_key)] = line
            elif isinstance(entry, Digest):
                facts.digests.append(line)
            elif isinstance(entry, EngineStart):
                facts.starts.append(line)
        facts.records = {shard: sorted(items, key=lambda ln: _record(ln).position)
                         for shard, items in by_shard.items()}
        return facts

    # -- derived views -------------------------------------------------------------------
    def started(self) -> RunStarted | None:
        return None if self.run is None else _as(self.run, RunStarted)

    def seen_collected(self) -> bool:
        """Whether consumers read the run's lanes (a history without lanes judges no
        destination)."""
        run = self.started()
        return run is not None and bool(run.lanes)

    def record_at(self, shard: str, position: int) -> Line | None:
        for line in self.records.get(shard, ()):
            if _record(line).position == position:
                return line
        return None

    def first_record(self, shard: str, dedup_key: str) -> Line | None:
        for line in self.records.get(shard, ()):
            if _record(line).dedup_key == dedup_key:
                return line
        return None

    def message_commands(self, message_id: str) -> list[tuple[Line, Line]]:
        """The SCHEDULE and RESCHEDULE records of ``message_id`` the shard APPLIED (each
        command's first record), with their results, in log order."""
        found: list[tuple[Line, Line]] = []
        message = self.messages.get(message_id)
        shards = [_as(message, FinalMessage).shard] if message else list(self.records)
        for shard in shards:
            firsts: set[str] = set()
            for line in self.records.get(shard, ()):
                record = _record(line)
                if record.delay_message_id != message_id or record.kind not in (
                        "SCHEDULE", "RESCHEDULE") or record.dedup_key is None:
                    continue
                if record.dedup_key in firsts:
                    continue
                firsts.add(record.dedup_key)
                result = self.results.get((shard, record.dedup_key))
                if result is not None and _as(result, FinalResult).status == "APPLIED" and \
                        _as(result, FinalResult).position == record.position:
                    found.append((line, result))
        return found

    def generation_command(self, message_id: str, generation: int) -> Line | None:
        """The record that made ``generation`` of the message (its SCHEDULE for 1, else the
        RESCHEDULE whose result names that generation)."""
        for line, result in self.message_commands(message_id):
            made = _as(result, FinalResult).generation
            if made == generation or (made is None and generation == 1 and
                                      _record(line).kind == "SCHEDULE"):
                return line
        return None

    def deliver_at(self, message_id: str, generation: int | None) -> int | None:
        if generation is not None:
            made = self.generation_command(message_id, generation)
            if made is not None:
                return _record(made).deliver_at_ms
        return None

    def seen_by_attempt(self) -> dict[str, list[Line]]:
        out: dict[str, list[Line]] = defaultdict(list)
        for line in self.seen:
            out[_as(line, Seen).attempt_id].append(line)
        return out

    def seen_by_message(self) -> dict[str, list[Line]]:
        out: dict[str, list[Line]] = defaultdict(list)
        for line in self.seen:
            out[_as(line, Seen).delay_message_id].append(line)
        return out

    def schedule_op(self, message_id: str) -> Line | None:
        for line in self.ops:
            op = _as(line, Op)
            if op.kind == "schedule" and op.message_id == message_id:
                return line
        return None

    def engine_wide_windows(self) -> list[tuple[int, int]]:
        """[start, heal] of every engine-wide fault (an open one lasts to the run's end)."""
        open_at: dict[str, list[int]] = defaultdict(list)
        windows: list[tuple[int, int]] = []
        for line in self.faults:
            fault = _as(line, Fault)
            if not fault.engine_wide:
                continue
            if fault.phase == "start":
                open_at[fault.nemesis].append(fault.at_ms)
            elif open_at[fault.nemesis]:
                windows.append((open_at[fault.nemesis].pop(0), fault.at_ms))
        end = _as(self.end, RunEnded).ended_ms if self.end is not None else 2**62
        windows += [(start, end) for starts in open_at.values() for start in starts]
        return windows


def _as(line: Line, kind: type[T]) -> T:
    entry = line.entry
    assert isinstance(entry, kind), (line.number, type(entry).__name__)
    return entry


def _record(line: Line) -> LogEntry:
    entry = line.entry
    assert isinstance(entry, LogEntry)
    return entry


def _violation(invariant: str, ids: Iterable[str | None], text: str,
               lines: Iterable[Line | None]) -> Violation:
    chosen: dict[int, str] = {}
    for line in lines:
        if line is not None:
            chosen[line.number] = line.text
    numbers = sorted(chosen)
    return Violation(invariant=invariant, ids=[i for i in ids if i], text=text,
                     lines=numbers, quotes=[chosen[n] for n in numbers])


def _dedup_key(kind: str, command_id: str) -> str:
    return ("c/" if kind in CLIENT_KINDS else "m/") + command_id


# -- the invariants -----------------------------------------------------------------------
def acknowledged_commands_applied(facts: Facts) -> list[Violation]:
    name = "acknowledged_commands_applied"
    out: list[Violation] = []
    collected = bool(facts.records)
    for line in facts.ops:
        op = _as(line, Op)
        for receipt in op.receipts if op.ok else ():
            key = _dedup_key(receipt.kind, receipt.command_id)
            ids = [op.message_id, receipt.command_id]
            at = facts.record_at(receipt.shard, receipt.source_position)
            if collected and (at is None or _record(at).dedup_key != key):
                what = "nothing" if at is None else \
                        f"{_record(at).kind} {_record(at).dedup_key}"
                out.append(_violation(name, ids, (
                    f"{receipt.kind} {receipt.command_id} was acknowledged "
                    f"({receipt.evidence}) at {receipt.shard} position "
                    f"{receipt.source_position}, but the Shard Log holds {what} there"),
                    [line, at]))
                continue
            result_line = facts.results.get((receipt.shard, key))
            first = facts.first_record(receipt.shard, key)
            if result_line is None:
                if collected:
                    out.append(_violation(name, ids, (
                        f"{receipt.kind} {receipt.command_id} is in the Shard Log of "
                        f"{receipt.shard} at position {receipt.source_position} but the shard "
                        "has no result for it: never applied"), [line, first]))
                continue
            result = _as(result_line, FinalResult)
            if first is not None and result.position != _record(first).position:
                out.append(_violation(name, ids, (
                    f"{receipt.command_id} was applied at position {result.position}, not at "
                    f"its first position in the log ({_record(first).position}): applied "
                    "again, or out of source order"), [line, first, result_line]))
            if op.kind == "retry" and at is not None:
                out += _retry_bytes(facts, name, line, op, receipt, at)
            if receipt.evidence == "APPLIED" and receipt.result is not None and \
                    receipt.result != result.status:
                out.append(_violation(name, ids, (
                    f"the client was told {receipt.result} for {receipt.command_id}, the shard's "
                    f"result is {result.status}"), [line, result_line]))
            if receipt.kind == "SCHEDULE" and result.status == "APPLIED" and \
                    op.message_id is not None and op.message_id in facts.messages:
                message_line = facts.messages[op.message_id]
                message = _as(message_line, FinalMessage)
                if message.schedule_command_id == receipt.command_id and \
                        message.created_position != result.position:
                    out.append(_violation(name, ids, (
                        f"message {op.message_id} was created at position "
                        f"{message.created_position}, but its SCHEDULE was applied at "
                        f"{result.position}: the command was applied more than once"),
                        [line, result_line, message_line]))
    return out


def _retry_bytes(facts: Facts, name: str, line: Line, op: Op, receipt: Receipt,
                 at: Line) -> list[Violation]:
    """A retry submits the exact bytes of the command it retries: its record's SHA-256 is
    that of the first record with the same dedup key."""
    first = facts.first_record(receipt.shard, _dedup_key(receipt.kind, receipt.command_id))
    if first is None or _record(first).sha256 == _record(at).sha256:
        return []
    return [_violation(name, [op.message_id, receipt.command_id], (
        f"retry {op.index} of {receipt.command_id} appended other bytes than the command it "
        f"retries (position {_record(at).position} against {_record(first).position})"),
        [line, first, at])]


def never_early(facts: Facts) -> list[Violation]:
    name = "never_early"
    run = facts.started()
    bound = run.clock_bound_ms if run is not None else 0
    out: list[Violation] = []
    for line in facts.seen:
        seen = _as(line, Seen)
        attempt = facts.attempts.get(seen.attempt_id)
        generation = attempt[0].generation if attempt else seen.generation
        deliver = facts.deliver_at(seen.delay_message_id, generation)
        made = None if generation is None else \
            facts.generation_command(seen.delay_message_id, generation)
        if deliver is None:
            deliver = seen.deliver_at_ms
        if deliver is None:
            continue
        if seen.received_ms < deliver - bound:
            out.append(_violation(name, [seen.delay_message_id, seen.attempt_id], (
                f"{seen.delay_message_id} (generation {generation}) was read at "
                f"{seen.received_ms}, {deliver - seen.received_ms} ms before its deliverAt "
                f"{deliver} (allowed clock bound {bound} ms)"),
                [made, attempt[1] if attempt else None, line]))
    return out


def cancel_before_admission(facts: Facts) -> list[Violation]:
    name = "cancel_before_admission"
    out: list[Violation] = []
    seen = facts.seen_by_message()
    for shard, records in facts.records.items():
        done: set[str] = set()
        for line in records:
            record = _record(line)
            if record.kind != "CANCEL" or record.dedup_key is None or record.dedup_key in done:
                continue
            done.add(record.dedup_key)
            result_line = facts.results.get((shard, record.dedup_key))
            if result_line is None or _as(result_line, FinalResult).status != "APPLIED" or \
                    _as(result_line, FinalResult).position != record.position:
                continue
            message_id = record.delay_message_id or ""
            for seen_line in seen.get(message_id, ()):
                out.append(_violation(name, [message_id, record.command_id,
                                             _as(seen_line, Seen).attempt_id], (
                    f"{message_id} was cancelled (APPLIED at {shard} position "
                    f"{record.position}), yet a consumer read it"),
                    [line, result_line, seen_line]))
            message_line = facts.messages.get(message_id)
            for attempt in _as(message_line, FinalMessage).attempts if message_line else ():
                if attempt.admitted_position > record.position:
                    out.append(_violation(name, [message_id, attempt.attempt_id], (
                        f"attempt {attempt.attempt_id} of {message_id} was admitted at position "
                        f"{attempt.admitted_position}, after its cancel won at "
                        f"{record.position}"), [line, result_line, message_line]))
    return out


def one_publish_per_attempt(facts: Facts) -> list[Violation]:
    name = "one_publish_per_attempt"
    out: list[Violation] = []
    by_attempt = facts.seen_by_attempt()
    for attempt_id, seen_lines in by_attempt.items():
        places = {(_as(s, Seen).stream, _as(s, Seen).order) for s in seen_lines}
        message_id = _as(seen_lines[0], Seen).delay_message_id
        if len(places) > 1:
            out.append(_violation(name, [message_id, attempt_id], (
                f"attempt {attempt_id} of {message_id} reached the destination "
                f"{len(places)} times"), seen_lines))
        if facts.messages and attempt_id not in facts.attempts:
            out.append(_violation(name, [message_id, attempt_id], (
                f"a consumer read attempt {attempt_id} of {message_id}, which no shard "
                "admitted (a Producer call without a durable PUBLISHING)"),
                [seen_lines[0], facts.messages.get(message_id)]))
    for message_id, seen_lines in facts.seen_by_message().items():
        seen_attempts = {_as(s, Seen).attempt_id for s in seen_lines}
        message_line = facts.messages.get(message_id)
        if message_line is None or len(seen_attempts) < 2:
            continue
        message = _as(message_line, FinalMessage)
        outcomes = _outcome_positions(facts, message.shard)
        ordered = sorted(message.attempts, key=lambda a: a.attempt_no)
        for later in ordered:
            if later.attempt_id not in seen_attempts:
                continue
            for earlier in ordered:
                if earlier.attempt_no >= later.attempt_no:
                    continue
                why = _second_attempt_wrong(earlier, later, outcomes)
                if why:
                    out.append(_violation(name, [message_id, earlier.attempt_id,
                                                 later.attempt_id], (
                        f"{message_id} reached the destination again by attempt "
                        f"{later.attempt_id} (admitted at {later.attempt_no}: position "
                        f"{later.admitted_position}) although attempt {earlier.attempt_id} "
                        f"{why}"), [message_line, *seen_lines]))
    return out


def _outcome_positions(facts: Facts, shard: str) -> dict[str, list[tuple[int, str]]]:
    """Each attempt's PUBLISH_OUTCOME records in the shard's log: (position, outcome)."""
    out: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for line in facts.records.get(shard, ()):
        record = _record(line)
        if record.kind == "PUBLISH_OUTCOME" and record.attempt_id and record.outcome:
            out[record.attempt_id].append((record.position, record.outcome))
    return out


def _second_attempt_wrong(earlier: FinalAttempt, later: FinalAttempt,
                          outcomes: dict[str, list[tuple[int, str]]]) -> str | None:
    """Why ``later`` may not have been admitted after ``earlier`` (None: it may)."""
    settled = earlier.settled_position
    if earlier.state == "PUBLISHED" and settled is not None and \
            settled < later.admitted_position:
        return f"was proven PUBLISHED at position {settled}, before it"
    if earlier.state == "NOT_PUBLISHED":
        return None  # proven absent; whether it truly was is destination_consistency's
    before = [o for pos, o in outcomes.get(earlier.attempt_id, ()) if
              pos < later.admitted_position]
    if "UNKNOWN" in before or (earlier.state == "UNKNOWN" and settled is not None
                               and settled < later.admitted_position):
        return None
    if settled is None or settled > later.admitted_position:
        return "was still PUBLISHING (neither UNKNOWN nor NOT_PUBLISHED) when it was admitted"
    return None


def ordered_lanes(facts: Facts) -> list[Violation]:
    name = "ordered_lanes"
    run = facts.started()
    if run is None:
        return []
    ordered = {lane.name for lane in run.lanes if lane.ordered}
    out: list[Violation] = []
    seen = facts.seen_by_message()
    groups: dict[tuple[str, str], list[Line]] = defaultdict(list)
    for line in facts.messages.values():
        message = _as(line, FinalMessage)
        if message.lane in ordered and message.key is not None:
            groups[(message.lane, message.key)].append(line)
    for (lane, key), members in groups.items():
        facts_of = [_ordering_facts(facts, m, seen.get(_as(m, FinalMessage).delay_message_id,
                                                       [])) for m in members]
        known = [f for f in facts_of if f is not None]
        for first in known:
            for second in known:
                if first is second or second.admitted is None:
                    continue
                if not (first.rank < second.rank and first.defined_at < second.admitted):
                    continue
                if first.seen is not None and second.seen is not None and \
                        _before(second.seen, first.seen):
                    out.append(_violation(name, [first.message_id, second.message_id], (
                        f"lane {lane} key {key!r}: {second.message_id} (deliverAt "
                        f"{second.rank[0]}) reached the destination before "
                        f"{first.message_id} (deliverAt {first.rank[0]}), which was pending "
                        f"when {second.message_id} was admitted at position "
                        f"{second.admitted}"),
                        [first.defined_line, second.defined_line, first.line, second.line,
                         second.seen, first.seen]))
                elif first.seen is None and first.open_attempt is not None and \
                        first.open_attempt.admitted_position < second.admitted:
                    out.append(_violation(name, [first.message_id, second.message_id,
                                                 first.open_attempt.attempt_id], (
                        f"lane {lane} key {key!r}: {second.message_id} was admitted at "
                        f"position {second.admitted} while {first.message_id}, earlier in "
                        f"deliverAt order, still had attempt {first.open_attempt.attempt_id} "
                        f"open ({first.open_attempt.state})"),
                        [first.line, second.line, second.seen]))
    return out


@dataclass(frozen=True)
class _Ordering:
    message_id: str
    line: Line
    rank: tuple[int, int]  # (deliverAt, position of the command that defined it)
    defined_at: int
    defined_line: Line | None
    admitted: int | None  # the winning admission's position of what reached the destination
    seen: Line | None  # the first durable record a consumer read
    open_attempt: FinalAttempt | None


def _ordering_facts(facts: Facts, line: Line, seen_lines: list[Line]) -> _Ordering | None:
    message = _as(line, FinalMessage)
    attempts = {a.attempt_id: a for a in message.attempts}
    durable = [s for s in seen_lines if _as(s, Seen).durable]
    first_seen = min(durable, key=lambda s: (_as(s, Seen).order, _as(s, Seen).received_ms),
                     default=None)
    open_attempt = next((a for a in message.attempts
                         if a.state in ("UNKNOWN", "PUBLISHING")), None)
    if first_seen is not None and _as(first_seen, Seen).attempt_id in attempts:
        attempt: FinalAttempt | None = attempts[_as(first_seen, Seen).attempt_id]
    else:
        attempt = open_attempt
    generation = attempt.generation if attempt is not None else message.generation
    defined = facts.generation_command(message.delay_message_id, generation)
    if defined is None:
        return None
    record = _record(defined)
    deliver = record.deliver_at_ms if record.deliver_at_ms is not None else \
        message.deliver_at_ms
    return _Ordering(message.delay_message_id, line, (deliver, record.position),
                     record.position, defined,
                     attempt.admitted_position if attempt is not None else None,
                     first_seen, open_attempt)


def _before(a: Line, b: Line) -> bool:
    """Whether record ``a`` is before ``b`` in the destination's order (one stream: its
    order; two streams: the consumer's receive times)."""
    sa, sb = _as(a, Seen), _as(b, Seen)
    if sa.stream == sb.stream:
        return bool(sa.order < sb.order)
    return bool(sa.received_ms < sb.received_ms)


def destination_consistency(facts: Facts) -> list[Violation]:
    name = "destination_consistency"
    out: list[Violation] = []
    by_attempt = facts.seen_by_attempt()
    quiesced = facts.end is not None and _as(facts.end, RunEnded).quiesced
    for line in facts.messages.values():
        message = _as(line, FinalMessage)
        for attempt in message.attempts:
            seen = by_attempt.get(attempt.attempt_id, [])
            durable = [s for s in seen if _as(s, Seen).durable]
            if attempt.state == "PUBLISHED" and not seen and facts.seen_collected():
                out.append(_violation(name, [message.delay_message_id, attempt.attempt_id], (
                    f"attempt {attempt.attempt_id} of {message.delay_message_id} is PUBLISHED "
                    f"(evidence {attempt.evidence!r}) but no consumer read it"), [line]))
            if seen and attempt.state == "NOT_PUBLISHED":
                out.append(_violation(name, [message.delay_message_id, attempt.attempt_id], (
                    f"attempt {attempt.attempt_id} of {message.delay_message_id} is "
                    f"NOT_PUBLISHED {attempt.disposition}, yet a consumer read it: a side "
                    "effect was classified as absent"), [line, *seen]))
            if durable and attempt.state == "UNKNOWN" and quiesced:
                out.append(_violation(name, [message.delay_message_id, attempt.attempt_id], (
                    f"attempt {attempt.attempt_id} of {message.delay_message_id} is still "
                    "UNKNOWN after quiescence although its record is in the destination, "
                    "where the evidence scan looks"), [line, *durable]))
        seen_any = [s for a in message.attempts for s in by_attempt.get(a.attempt_id, [])]
        if seen_any and message.state not in ("PUBLISHED", "UNCERTAIN"):
            out.append(_violation(name, [message.delay_message_id], (
                f"{message.delay_message_id} ends {message.state} though a consumer read it"),
                [line, *seen_any]))
    return out


def admission_not_expired(facts: Facts) -> list[Violation]:
    name = "admission_not_expired"
    out: list[Violation] = []
    for line in facts.messages.values():
        message = _as(line, FinalMessage)
        if message.state != "EXPIRED":
            continue
        for attempt in message.attempts:
            if attempt.state == "NOT_PUBLISHED" and attempt.disposition == "LANE_UNAVAILABLE":
                admission = facts.record_at(message.shard, attempt.admitted_position)
                out.append(_violation(name, [message.delay_message_id, attempt.attempt_id], (
                    f"{message.delay_message_id} ends EXPIRED although its attempt "
                    f"{attempt.attempt_id} won Publish Admission at position "
                    f"{attempt.admitted_position} (before expireAt {message.expire_at_ms}) "
                    "and never reached the destination (NOT_PUBLISHED LANE_UNAVAILABLE)"),
                    [admission, line]))
    return out


def barrier_reads_acknowledged_writes(facts: Facts) -> list[Violation]:
    name = "barrier_reads_acknowledged_writes"
    out: list[Violation] = []
    writes: dict[str, list[tuple[Line, str, FinalResult, Line]]] = defaultdict(list)
    for line in facts.ops:
        op = _as(line, Op)
        if not op.ok or op.message_id is None or op.kind not in (
                "schedule", "cancel", "reschedule", "retry"):
            continue
        for receipt in op.receipts:
            if receipt.kind not in ("SCHEDULE", "CANCEL", "RESCHEDULE"):
                continue
            result_line = facts.results.get((receipt.shard, _dedup_key(receipt.kind,
                                                                       receipt.command_id)))
            if result_line is not None and _as(result_line, FinalResult).status == "APPLIED":
                writes[op.message_id].append((line, receipt.kind,
                                              _as(result_line, FinalResult), result_line))
    for line in facts.ops:
        query = _as(line, Op)
        if query.kind != "query_barrier" or not query.ok or query.answer is None or \
                query.message_id is None:
            continue
        answer = query.answer
        for write_line, kind, result, result_line in writes.get(query.message_id, []):
            if not _acknowledged_before(_as(write_line, Op), query):
                continue  # not acknowledged before the query began: no order between them
            wrong = None
            if answer.state is None:
                wrong = "answered that there is no such message"
            elif kind == "RESCHEDULE" and result.generation is not None and \
                    (answer.generation or 0) < result.generation:
                wrong = f"answered generation {answer.generation}, before it"
            elif kind == "CANCEL" and answer.state != "CANCELLED":
                wrong = f"answered {answer.state}"
            if wrong:
                out.append(_violation(name, [query.message_id], (
                    f"a query of {query.message_id} with the query barrier {wrong}, though its "
                    f"{kind} was acknowledged before the query began (applied at "
                    f"{result.shard} position {result.position})"),
                    [write_line, result_line, line]))
    return out


OPERATOR_OPS = frozenset({"lane_close", "lane_open", "shard_pause", "shard_resume"})


def operator_mutations_take_effect(facts: Facts) -> list[Violation]:
    name = "operator_mutations_take_effect"
    out: list[Violation] = []
    first_at: dict[tuple[str, int], Line] = {}
    for line in facts.ops:
        op = _as(line, Op)
        if op.kind not in OPERATOR_OPS or not op.ok:
            continue
        for receipt in op.receipts:
            place = (receipt.shard, receipt.source_position)
            earlier = first_at.get(place)
            if earlier is not None or receipt.duplicate_of is not None:
                where = f"op {_as(earlier, Op).index}'s" if earlier is not None else "an earlier"
                out.append(_violation(name, [op.target, receipt.command_id], (
                    f"{op.kind} {op.target} (op {op.index}) was answered {receipt.result} with "
                    f"{where} result at {receipt.shard} position {receipt.source_position} "
                    f"(idempotency key {receipt.command_id}): nothing was applied"),
                    [earlier, line, facts.record_at(receipt.shard, receipt.source_position)]))
            else:
                first_at[place] = line
    return out


def _acknowledged_before(write: Op, query: Op) -> bool:
    """Whether ``write`` completed before ``query`` was invoked: by the client's own event
    order where both have it, else by their times (strictly: the same millisecond is no
    order)."""
    if write.complete_seq is not None and query.invoke_seq is not None:
        return write.complete_seq < query.invoke_seq
    return write.complete_ms < query.invoke_ms


def lane_isolation(facts: Facts) -> list[Violation]:
    name = "lane_isolation"
    run = facts.started()
    if run is None:
        return []
    healthy = {lane.name for lane in run.lanes if lane.healthy}
    bound = run.lateness_bound_ms
    windows = facts.engine_wide_windows()
    out: list[Violation] = []
    firsts: dict[str, Line] = {}
    for line in facts.seen:
        seen = _as(line, Seen)
        if seen.lane in healthy and seen.delay_message_id not in firsts:
            firsts[seen.delay_message_id] = line
    for message_id, line in firsts.items():
        seen = _as(line, Seen)
        attempt = facts.attempts.get(seen.attempt_id)
        deliver = facts.deliver_at(message_id, attempt[0].generation if attempt else None)
        if deliver is None:
            deliver = seen.deliver_at_ms
        if deliver is None:
            continue
        op_line = facts.schedule_op(message_id)
        start = max(deliver, _as(op_line, Op).invoke_ms if op_line else deliver)
        late = seen.received_ms - start
        if late <= bound:
            continue
        if any(begin <= seen.received_ms and start <= end + bound for begin, end in windows):
            continue  # it waited across an engine-wide fault
        out.append(_violation(name, [message_id, seen.attempt_id], (
            f"{message_id} on healthy lane {seen.lane} was read {late} ms after it was due "
            f"(bound {bound} ms), while other lanes were faulted"), [op_line, line]))
    return out


def due_messages_settle(facts: Facts) -> list[Violation]:
    name = "due_messages_settle"
    if facts.end is None:
        return []
    end = _as(facts.end, RunEnded)
    run = facts.started()
    ordered = {lane.name for lane in run.lanes if lane.ordered} if run else set()
    held = {(m.lane, m.key) for m in (_as(line, FinalMessage) for line in facts.messages.values())
            if m.lane in ordered and m.key is not None and m.state == "UNCERTAIN"}
    out: list[Violation] = []
    for line in facts.messages.values():
        message = _as(line, FinalMessage)
        if message.state == "SCHEDULED" and (message.lane, message.key) in held:
            continue  # an UNCERTAIN head holds its key until evidence or an operator settles it
        if message.state in ("SCHEDULED", "PUBLISHING") and \
                message.deliver_at_ms < end.ended_ms - SETTLE_GRACE_MS:
            out.append(_violation(name, [message.delay_message_id], (
                f"{message.delay_message_id} is still {message.state} at the end of the run, "
                f"{end.ended_ms - message.deliver_at_ms} ms after its deliverAt"),
                [line, facts.end]))
    return out


def replay_digests(facts: Facts) -> list[Violation]:
    name = "replay_digests"
    live: dict[str, Line] = {}
    for line in facts.digests:
        digest = _as(line, Digest)
        if digest.source == "live":
            live[digest.shard] = line
    out: list[Violation] = []
    for line in facts.digests:
        digest = _as(line, Digest)
        if digest.source == "live":
            if digest.error is not None:
                out.append(_violation(name, [digest.shard], (
                    f"the live digest of {digest.shard} could not be read: {digest.error}"),
                    [line]))
            continue
        reference = live.get(digest.shard)
        if digest.error is not None or reference is None:
            out.append(_violation(name, [digest.shard, digest.source], (
                f"{digest.source} of {digest.shard} did not give a digest: "
                f"{digest.error or 'no live digest to compare with'}"), [line, reference]))
            continue
        want = _as(reference, Digest)
        if digest.digest != want.digest or digest.applied_position != want.applied_position:
            out.append(_violation(name, [digest.shard, digest.source], (
                f"{digest.source} of {digest.shard} gives {digest.digest} at position "
                f"{digest.applied_position}; the live database has {want.digest} at "
                f"{want.applied_position}"), [reference, line]))
    return out


def engine_starts(facts: Facts) -> list[Violation]:
    name = "engine_starts"
    out: list[Violation] = []
    for line in facts.starts:
        start = _as(line, EngineStart)
        took = None if start.ready_ms is None else start.ready_ms - start.requested_ms
        if took is None or took > START_BOUND_MS:
            what = f"took {took} ms" if took is not None else \
                f"never answered ({start.error or 'no reason given'})"
            lanes = sorted({lane for f in facts.faults for lane in _as(f, Fault).lanes
                            if _as(f, Fault).at_ms <= start.requested_ms})
            out.append(_violation(name, [f"pid {start.pid}"], (
                f"an engine start {what}; bound {START_BOUND_MS} ms"
                + (f" (lanes faulted before it: {', '.join(lanes)})" if lanes else "")),
                [line]))
    return out


Invariant = Callable[[Facts], list[Violation]]

INVARIANTS: dict[str, Invariant] = {
    "acknowledged_commands_applied": acknowledged_commands_applied,
    "never_early": never_early,
    "cancel_before_admission": cancel_before_admission,
    "one_publish_per_attempt": one_publish_per_attempt,
    "ordered_lanes": ordered_lanes,
    "destination_consistency": destination_consistency,
    "admission_not_expired": admission_not_expired,
    "barrier_reads_acknowledged_writes": barrier_reads_acknowledged_writes,
    "operator_mutations_take_effect": operator_mutations_take_effect,
    "lane_isolation": lane_isolation,
    "due_messages_settle": due_messages_settle,
    "engine_starts": engine_starts,
    "replay_digests": replay_digests,
}


def check(lines: Sequence[Line]) -> list[Violation]:
    """Every invariant's violations over the history ``lines``."""
    facts = Facts.of(lines)
    return [v for invariant in INVARIANTS.values() for v in invariant(facts)]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.chaos.checker HISTORY.jsonl``: print every violation; exit 1 if any."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m tests.chaos.checker HISTORY.jsonl", file=sys.stderr)
        return 2
    violations = check(read_history(Path(args[0])))
    for violation in violations:
        print(violation.render())
    print(f"{len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
