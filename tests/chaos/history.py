"""The history of one chaos run: every fact the checker judges, as JSON lines.

One line is one frozen Struct, tagged by ``type``:

* ``run``: what was run (seed, backend, nemeses, lanes, the clock and lateness bounds);
* ``op``: one client operation (a schedule, cancel, reschedule, a retry of the same
  prepared command, an operator mutation, a query) with its invoke and completion times
  (the client's wall clock) and its receipt: QUEUED (the Shard Log holds it at
  ``source_position``), APPLIED (the shard's result), or none when the call failed
  (``ok = False``: indeterminate, the command may or may not be in the log, like
  Jepsen's ``:info``);
* ``seen``: one record a destination consumer read, with the consumer's wall clock when it
  first read it and its place in the destination's order (``stream``, ``order``);
* ``fault``: a nemesis starting or healing;
* ``start``: an engine start, and when it answered;
* ``record``: one record of a Shard Log, read after the run (what was really appended);
* ``message`` and ``result``: each shard's final state after quiescence (messages with
  their attempts; results by dedup key);
* ``digest``: a state digest, live or by an offline replay;
* ``end``: the run is over.

Every time is epoch milliseconds on this host's wall clock (the consumers, the client and
an engine without a clock step share it). A failed run is re-checked offline with
``python -m tests.chaos.checker HISTORY.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Literal

import msgspec

OpKind = Literal["schedule", "cancel", "reschedule", "retry", "lane_close", "lane_open",
                 "shard_pause", "shard_resume", "attempt_resolve", "query",
                 "query_barrier"]


class LaneInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A lane of the run's home: its destination, whether it is ORDERED, and whether any
    nemesis touches it (``healthy``: the lane isolation invariant holds it to
    ``RunStarted.lateness_bound_ms``)."""

    name: str
    destination: str  # file | kafka | pulsar
    ordered: bool = False
    healthy: bool = False
    target: str = ""  # the outbox path or topic


class RunStarted(msgspec.Struct, frozen=True, kw_only=True, tag="run", tag_field="type"):
    """What was run. ``clock_bound_ms``: how early a consumer may see a message by this
    host's clock (0 unless a nemesis moves the engine's clock: docs/rules.md §6 documents
    what each Shard Log can detect). ``lateness_bound_ms``: a healthy lane's bound."""

    seed: int
    backend: str
    nemeses: list[str]
    ops: int
    duration_s: float
    lanes: list[LaneInfo]
    shards: list[str]
    clock_bound_ms: int = 0
    lateness_bound_ms: int = 10_000
    started_ms: int
    inline_limit: int = 0
    home: str = ""


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """What the client was told of one command (``nereus.client.Receipt``'s fields)."""

    evidence: str  # QUEUED | APPLIED
    shard: str
    source_position: int
    command_id: str
    kind: str
    result: str | None = None  # APPLIED | REJECTED | STALE | RECORDED, once APPLIED
    reason: str | None = None
    generation: int | None = None
    attempt_id: str | None = None
    duplicate_of: int | None = None


class QueryAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``message show`` (``barrier``: with the query barrier) answered."""

    state: str | None  # None: not found
    generation: int | None = None
    applied_position: int | None = None
    barrier_position: int | None = None
    conclusive: bool = False


class Op(msgspec.Struct, frozen=True, kw_only=True, tag="op", tag_field="type"):
    """One client operation. ``ok`` False: the call failed and nothing is known of it
    (``error`` says why); a ``retry`` resubmits op ``retry_of``'s exact prepared bytes."""

    index: int
    kind: OpKind
    invoke_ms: int
    complete_ms: int
    ok: bool
    message_id: str | None = None
    lane: str | None = None
    key: str | None = None
    deliver_at_ms: int | None = None
    expire_at_ms: int | None = None
    payload_bytes: int = 0
    large: bool = False
    wait: bool = False
    retry_of: int | None = None
    target: str | None = None  # an operator mutation's lane, shard or attempt
    receipts: list[Receipt] = msgspec.field(default_factory=list)
    answer: QueryAnswer | None = None
    error: str | None = None
    # the client's own order of invocations and completions (one counter for all its
    # threads): real-time order where two times fall in the same millisecond
    invoke_seq: int | None = None
    complete_seq: int | None = None


class Seen(msgspec.Struct, frozen=True, kw_only=True, tag="seen", tag_field="type"):
    """One record a destination consumer read. ``stream``: one ordered stream (an outbox
    file, a topic partition); ``order``: its place there. ``durable``: read from where
    the evidence scan looks (False for bytes drained from a FIFO planted at a lane's path,
    which no scan can find again)."""

    lane: str
    stream: str
    order: int
    where: str
    delay_message_id: str
    attempt_id: str
    received_ms: int
    generation: int | None = None
    key: str | None = None
    deliver_at_ms: int | None = None  # as the record says
    payload_bytes: int = 0
    durable: bool = True


class Fault(msgspec.Struct, frozen=True, kw_only=True, tag="fault", tag_field="type"):
    """A nemesis starting or healing. ``engine_wide``: it stops every lane (a killed or
    stopped engine, a Shard Log outage, a clock step), so lane isolation does not judge
    lateness across it."""

    nemesis: str
    phase: Literal["start", "heal"]
    at_ms: int
    detail: str = ""
    engine_wide: bool = True
    lanes: list[str] = msgspec.field(default_factory=list)


class EngineStart(msgspec.Struct, frozen=True, kw_only=True, tag="start", tag_field="type"):
    """One engine start the run asked for: when, and when (if ever) it answered with every
    shard ACTIVE; ``error``: why it did not."""

    requested_ms: int
    ready_ms: int | None
    pid: int | None = None
    error: str | None = None


class LogEntry(msgspec.Struct, frozen=True, kw_only=True, tag="record", tag_field="type"):
    """One record of a Shard Log, read after the run. The fields a kind does not have are
    None."""

    shard: str
    position: int
    broker_ms: int
    kind: str
    sha256: str
    dedup_key: str | None = None  # c/<commandId>, m/<idempotencyKey>, a/<attemptId>...
    command_id: str | None = None
    delay_message_id: str | None = None
    attempt_id: str | None = None
    generation: int | None = None
    lane: str | None = None
    deliver_at_ms: int | None = None
    expire_at_ms: int | None = None
    outcome: str | None = None
    disposition: str | None = None
    decided_earliest_ms: int | None = None
    decided_latest_ms: int | None = None
    owner_id: str | None = None


class FinalAttempt(msgspec.Struct, frozen=True, kw_only=True):
    attempt_id: str
    attempt_no: int
    generation: int
    state: str
    admitted_position: int
    admitted_broker_ms: int
    disposition: str
    evidence: str
    settled_position: int | None
    settled_by: str | None
    owner_id: str


class FinalMessage(msgspec.Struct, frozen=True, kw_only=True, tag="message",
                   tag_field="type"):
    """A message as its shard holds it after quiescence."""

    shard: str
    delay_message_id: str
    lane: str
    state: str
    generation: int
    deliver_at_ms: int
    action_at_ms: int
    expire_at_ms: int | None
    key: str | None
    created_position: int
    updated_position: int
    schedule_command_id: str
    detail: str | None
    attempts: list[FinalAttempt]


class FinalResult(msgspec.Struct, frozen=True, kw_only=True, tag="result", tag_field="type"):
    """A shard's stored result under a dedup key (``c/<commandId>``, ``a/<attemptId>``...)."""

    shard: str
    dedup_key: str
    status: str
    kind: str
    position: int
    reason: str | None = None
    detail: str | None = None
    delay_message_id: str | None = None
    generation: int | None = None
    attempt_id: str | None = None


class Digest(msgspec.Struct, frozen=True, kw_only=True, tag="digest", tag_field="type"):
    """A shard's state digest: ``live`` (its database after the run), ``replay:empty`` or
    ``replay:checkpoint:<id>`` (an offline replay up to the live position). ``error``: the
    replay could not run (that is a violation too)."""

    shard: str
    source: str
    digest: str | None
    applied_position: int | None
    error: str | None = None


class RunEnded(msgspec.Struct, frozen=True, kw_only=True, tag="end", tag_field="type"):
    """The run is over. ``quiesced``: every message reached an end (or UNCERTAIN) before
    the final state was read; ``faults``: how many faults the nemeses injected."""

    ended_ms: int
    quiesced: bool
    faults: int = 0
    notes: list[str] = msgspec.field(default_factory=list)


Entry = (RunStarted | Op | Seen | Fault | EngineStart | LogEntry | FinalMessage | FinalResult
         | Digest | RunEnded)

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Entry)


def encode_line(entry: Entry) -> bytes:
    """One history line (no newline)."""
    return _ENCODER.encode(entry)


def decode_line(line: bytes | str) -> Entry:
    return _DECODER.decode(line)


class HistoryWriter:
    """Appends entries to a JSON-lines file as they happen (flushed each line, so a run that
    dies part-way leaves what it saw)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] = open(path, "ab")  # noqa: SIM115 - closed by close()

    def write(self, entry: Entry) -> None:
        self._handle.write(encode_line(entry) + b"\n")
        self._handle.flush()

    def write_all(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            self.write(entry)

    def close(self) -> None:
        self._handle.close()


class Line(msgspec.Struct, frozen=True):
    """An entry with its line number (1-based) and text, for quoting in a violation."""

    number: int
    text: str
    entry: Entry


def read_history(path: Path) -> list[Line]:
    return list(parse_lines(path.read_text().splitlines()))


def parse_lines(texts: Iterable[str]) -> Iterator[Line]:
    for number, text in enumerate(texts, start=1):
        if text.strip():
            yield Line(number, text, decode_line(text))


def lines_of(entries: Iterable[Entry]) -> list[Line]:
    """Entries as the lines a history file of them would hold (for hand-made histories)."""
    return [Line(n, encode_line(e).decode(), e) for n, e in enumerate(entries, start=1)]
